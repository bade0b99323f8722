"""Fused Adam updates for embedding gradients: one kernel pass over a table instead of about eight.

`tf.compat.v1.train.AdamOptimizer` applies a sparse gradient (an embedding's
`IndexedSlices`) by summing duplicate rows, then decaying both moment tables
densely (`m * beta1`, `v * beta2`), scattering the new rows in, and updating the
whole variable with `lr_t * m / (sqrt(v) + epsilon)`, each step its own op over
the full table. That is the cost that dominates CTR models on CPU, and the
scatters behind it got slower in TensorFlow 2.16+.

Those semantics are dense (every row's moments decay, every row moves), so the
same update can be done as: sum the rows into a dense gradient
(`unsorted_segment_sum`, the same sum the duplicate-summing step did) and apply
it with the fused `ResourceApplyAdam` kernel that v1 Adam already uses for
dense gradients. The arithmetic per element is the same; only the number of
passes over memory changes. The sum runs on the variable's device (the
optimizer colocates updates with variables), so a parameter server still
receives the sparse rows only.

`fused_sparse_adam()` swaps this in while a model_fn builds its graph;
`RunConfig(fuse_sparse_updates=False)` keeps TensorFlow's own path.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf

from elastimator._scoped_attribute import ScopedAttribute

_ADAM = tf.compat.v1.train.AdamOptimizer
_OWN = ("_resource_apply_sparse", "_resource_apply_dense")


def _apply_rows_densely(optimizer, grad: tf.Tensor, handle, indices: tf.Tensor) -> tf.Operation:
    """Adam on a resource variable, its gradient given as (possibly repeated) rows."""
    if any(getattr(type(optimizer), name) is not getattr(_ADAM, name) for name in _OWN):
        # A subclass with its own update rule (a lazy Adam, say) keeps it.
        return _PATCH.original(optimizer, grad, handle, indices)
    rows = handle.shape[0] if handle.shape.rank and handle.shape[0] is not None else tf.shape(handle)[0]
    dense = tf.math.unsorted_segment_sum(grad, indices, num_segments=rows)
    return optimizer._resource_apply_dense(dense, handle)  # pylint: disable=protected-access


_PATCH = ScopedAttribute(_ADAM, "_resource_apply_sparse_duplicate_indices", _apply_rows_densely)


@contextlib.contextmanager
def fused_sparse_adam(enabled: bool = True) -> Iterator[None]:
    """While open, v1 AdamOptimizer applies sparse gradients with the fused dense kernel (see the module doc)."""
    with _PATCH.applied() if enabled else contextlib.nullcontext():
        yield
