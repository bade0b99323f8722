"""The chief's checkpoint saver: TensorFlow's `CheckpointSaverHook`, with the graph serialized once.

When the session is created, TensorFlow's hook writes the graph as text
(`graph.pbtxt`), adds the graph and meta graph to the events, and saves the
first checkpoint, all before the first step. It makes the whole graph's
GraphDef once for each, and writes the text with protobuf's pure-Python
encoder (docs/performance.md, "Costs behind the engine's choices").

Here one GraphDef (`graph_defs.of`) serves the file, the events' graph and meta
graph, and the meta graphs of the checkpoints elastimator's saver writes. The
text comes from the protobuf runtime's own encoder (`str()` of the message,
upb's native one). The file parses to the same
GraphDef as TensorFlow's; its bytes may order an op's attributes differently.
Everything else happens as in TensorFlow's hook, in the same order.
"""

from __future__ import annotations

import os
import sys

import tensorflow as tf

from elastimator.estimator import tf_internals
from elastimator.estimator.saving import graph_defs

GRAPH_FILE = "graph.pbtxt"


class CheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
    """`tf.compat.v1.train.CheckpointSaverHook` (same arguments) that makes the graph's GraphDef once."""

    def after_create_session(self, session, coord):
        step = self._current_step(session)
        graph = tf.compat.v1.get_default_graph()
        graph_def = graph_defs.of(graph)  # (the graph is final: one GraphDef serves the file, events and checkpoints)
        if self._save_graph_def:
            write_graph_file(graph_def, self._checkpoint_dir)
        saver = self._get_saver()
        self._add_graph(graph, graph_def)
        self._summary_writer.add_meta_graph(tf_internals.meta_graph.create_meta_graph_def(
            graph_def=graph_def, saver_def=saver.saver_def if saver else None))
        self._save(session, step)  # the checkpoint of the step training starts (or resumes) at
        self._timer.update_last_triggered_step(step)

    def end(self, session):
        last_step = self._current_step(session)
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)

    def _current_step(self, session) -> int:
        """The global step, read while no step runs, from its variable. TensorFlow's hook reads it through the
        step read the training's hooks share, which under several steps per call waits for the call's loop:
        run alone, that read prepares (optimizes) the loop's whole subgraph for the one value the variable holds
        anyway."""
        variable = tf.compat.v1.train.get_global_step()
        return session.run(variable if variable is not None else self._global_step_tensor)

    def _add_graph(self, graph: tf.Graph, graph_def) -> None:
        """What `add_graph(graph)` writes to the events (the graph's plugin assets, then its GraphDef), from the
        GraphDef already made rather than another `as_graph_def` of the whole graph."""
        writer = self._summary_writer
        if not tf_internals.writes_graph_def(writer):
            writer.add_graph(graph)  # a writer of another kind: its own way
            return
        tf_internals.add_graph_def(writer, graph, graph_def)


def write_graph_file(graph_def, directory: str) -> None:
    """Writes `graph_def` as text to `directory`/graph.pbtxt, as `tf.io.write_graph` does (any file system,
    atomically), with the protobuf runtime's text encoder."""
    if sys.byteorder == "big":  # tf.io.write_graph swaps the tensors' bytes to little-endian first
        tf.io.write_graph(graph_def, directory, GRAPH_FILE)
        return
    tf.io.gfile.makedirs(directory)
    tf_internals.file_io.atomic_write_string_to_file(os.path.join(directory, GRAPH_FILE), str(graph_def))
