"""A finalized graph's GraphDef, made once.

A training graph is final once its session exists, yet TensorFlow serializes
it whole again for each thing that records it: `graph.pbtxt`, the events'
graph and meta graph, and every checkpoint's `.meta` file (`Saver.save`, once
per checkpoint), paid before the first step and at every checkpoint (docs/performance.md, "Costs behind the engine's choices").
Here they all share one GraphDef while the graph stays unchanged.
"""

from __future__ import annotations

import threading
import weakref

import tensorflow as tf

_lock = threading.Lock()
_made: "weakref.WeakKeyDictionary[tf.Graph, tuple[int, object]]" = weakref.WeakKeyDictionary()


def of(graph: tf.Graph):
    """`graph.as_graph_def(add_shapes=True)`, the same object each time for a finalized graph that has not changed
    since (a graph still being built gets a new one each time). Read it; do not change it."""
    if not graph.finalized:
        return graph.as_graph_def(add_shapes=True)
    with _lock:
        made = _made.get(graph)
        if made is not None and made[0] == graph.version:
            return made[1]
    graph_def = graph.as_graph_def(add_shapes=True)
    with _lock:
        _made[graph] = (graph.version, graph_def)
    return graph_def


class Saver(tf.compat.v1.train.Saver):
    """`tf.compat.v1.train.Saver` (same arguments) whose meta graphs of a finalized graph share its GraphDef
    (`of`) instead of serializing the graph again for every checkpoint."""

    def export_meta_graph(self, filename=None, collection_list=None, as_text=False, export_scope=None,
                          clear_devices=False, clear_extraneous_savers=False, strip_default_attrs=False,
                          save_debug_info=False):
        return tf.compat.v1.train.export_meta_graph(
            filename=filename, graph_def=of(tf.compat.v1.get_default_graph()), saver_def=self.saver_def,
            collection_list=collection_list, as_text=as_text, export_scope=export_scope,
            clear_devices=clear_devices, clear_extraneous_savers=clear_extraneous_savers,
            strip_default_attrs=strip_default_attrs, save_debug_info=save_debug_info)
