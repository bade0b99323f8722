"""What the Estimator engine opens around a model_fn call so that embedding variables work in it."""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf

from elastimator.embedding import context, lookup, updates


@contextlib.contextmanager
def model_fn_scope(*, training: bool, num_ps: int) -> Iterator[None]:
    """Embedding variables built for `training`, placed over `num_ps` parameter servers, trained by the v1
    optimizers; the training lookups' rows leave the trainable-variables collection once the model_fn
    returns (the optimizer has used them, and a checkpoint's meta graph cannot describe a tensor there)."""
    graph = tf.compat.v1.get_default_graph()
    with context.building(training=training, num_ps=num_ps), updates.sparse_updates():
        try:
            yield
        finally:
            lookup.unlist_trainable_rows(graph)
