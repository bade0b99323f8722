"""Global-step eviction: before each checkpoint, ids not looked up in training for `steps_to_live` steps go.

DeepRec evicted when it saved, and so does this: the chief's checkpoint saver calls
`EvictionListener.before_save`, which removes every stale id from its partition's tables (its row,
its occurrence count and its optimizer slots), so the checkpoint and the served model no longer
hold it. An evicted id that comes back starts again from its initial row.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from elastimator.embedding.variable import EmbeddingVariable, Partition, embedding_variables

_log = logging.getLogger("elastimator.embedding")


def _evict(variable: EmbeddingVariable, part: Partition, step: tf.Tensor) -> tf.Tensor:
    with part.placed():
        keys, seen = part.seen.export()
        seen = tf.reshape(seen, [-1, 2])  # [occurrences, last step] per id
        stale = tf.boolean_mask(keys, seen[:, 1] < step - variable.option.steps_to_live)
        removed = [table.remove(stale) for table in part.tables()]
        with tf.control_dependencies(removed):
            return tf.size(stale, out_type=tf.int64)


class EvictionListener(tf.compat.v1.train.CheckpointSaverListener):
    """Evicts stale ids of every embedding variable with a `GlobalStepEvict` before each checkpoint."""

    def __init__(self, variables: list[EmbeddingVariable]):
        self.variables = [v for v in variables if v.option.steps_to_live is not None]
        """The variables it evicts from: those of `variables` with a GlobalStepEvict."""
        self._step = None
        self._evicted: dict[str, tf.Tensor] = {}

    def begin(self):
        # Built here, once the optimizer has made its slot tables: they are evicted with the ids.
        self._step = tf.compat.v1.placeholder(tf.int64, [], name="embedding_eviction_step")
        with tf.name_scope("embedding_eviction"):
            self._evicted = {v.name: tf.add_n([_evict(v, p, self._step) for p in v.partitions])
                             for v in self.variables}

    def before_save(self, session, global_step_value):
        counts = session.run(self._evicted, {self._step: global_step_value})
        evicted = {name: int(n) for name, n in counts.items() if n}
        if evicted:
            _log.info("Evicted ids not seen for their steps_to_live at step %d: %s", global_step_value,
                      ", ".join(f"{name} {n}" for name, n in sorted(evicted.items())))


def eviction_listeners(graph: tf.Graph) -> list[EvictionListener]:
    """The listener `graph`'s embedding variables need (none when none of them evicts)."""
    listener = EvictionListener(embedding_variables(graph))
    return [listener] if listener.variables else []
