"""Fused Adam updates for embedding gradients: one kernel pass over a table instead of about eight.

`tf.compat.v1.train.AdamOptimizer` applies a sparse gradient (an embedding's
`IndexedSlices`) by summing duplicate rows, then decaying both moment tables
densely (`m * beta1`, `v * beta2`), scattering the new rows in, and updating the
whole variable with `lr_t * m / (sqrt(v) + epsilon)`, each step its own op over
the full table. That is the cost that dominates CTR models on CPU, and the
scatters behind it got slower in TensorFlow 2.16+.

Those semantics are dense (every row's moments decay, every row moves), so the
same update can be done as: sum the rows into a dense gradient (the same sum
the duplicate-summing step did) and apply it with the fused `ResourceApplyAdam`
kernel that v1 Adam already uses for dense gradients. The arithmetic per
element is the same; only the number of passes over memory changes. The sum
runs on the variable's device (the optimizer colocates updates with
variables), so a parameter server still receives the sparse rows only.

On CPU the sum is a sparse-dense product, `onehot(indices)^T @ rows`, which
adds each row into its output row in one pass over the batch, in batch order,
so it equals `unsorted_segment_sum` bit for bit. `unsorted_segment_sum`'s CPU
kernel splits the table's rows among threads and has every thread scan the
whole batch, which measured slower (bench/results/embedding_gradient.md).
Other devices keep `unsorted_segment_sum`.

A table that a model reads with a gather, as every embedding lookup does, is
in TensorFlow's copy-on-read mode from its first lookup on, and a dense update
of a table in that mode first copies the whole table to a fresh buffer. The
update runs once the gradient's rows are summed, which in a model whose loss
depends on what it looked up is after those lookups, so it first switches the mode off (`DisableCopyOnRead`,
which only clears the flag) and the Adam kernel writes in place. A dense read
whose result is still held keeps its value: the kernel copies a buffer that
has another owner. As with every v1 optimizer (`use_locking=False`), nothing
orders the update against a lookup whose result the loss does not use; the
step's next lookup turns the mode back on without a copy. The copy had cost
more than the Adam pass itself (bench/results/embedding_gradient.md).

`fused_sparse_adam()` swaps this in while a model_fn builds its graph;
`RunConfig(fuse_sparse_updates=False)` keeps TensorFlow's own path.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import tensorflow as tf

from elastimator._context_patch import ContextPatch
from elastimator.estimator import tf_internals

_ADAM = tf.compat.v1.train.AdamOptimizer
_OWN = ("_resource_apply_sparse", "_resource_apply_dense")


def _apply_rows_densely(optimizer, grad: tf.Tensor, handle, indices: tf.Tensor) -> tf.Operation:
    """Adam on a resource variable, its gradient given as (possibly repeated) rows."""
    if any(getattr(type(optimizer), name) is not getattr(_ADAM, name) for name in _OWN):
        # A subclass with its own update rule (a lazy Adam, say) keeps it.
        return _PATCH.original(optimizer, grad, handle, indices)
    rows = handle.shape[0] if handle.shape.rank and handle.shape[0] is not None else tf.shape(handle)[0]
    summed = _sum_rows(grad, indices, rows, handle.device)
    with tf.control_dependencies(_in_place(handle, after=summed)):
        return tf_internals.resource_apply_dense(optimizer, summed, handle)


def _sum_rows(grad: tf.Tensor, indices: tf.Tensor, rows, device: str) -> tf.Tensor:
    """`unsorted_segment_sum(grad, indices, rows)`, as a sparse-dense product where the sum runs on a CPU."""
    if not _on_cpu(device):
        return tf.math.unsorted_segment_sum(grad, indices, num_segments=rows)
    count = tf.shape(indices, out_type=tf.int64)[0]
    flat = tf.reshape(grad, tf.stack([count, -1]))
    # Row i of the batch is entry (i, indices[i]) of a [count, rows] one-hot matrix; its transpose times the
    # batch adds every row into its table row.
    onehot_indices = tf.stack([tf.range(count), tf.cast(indices, tf.int64)], axis=1)
    summed = tf.raw_ops.SparseTensorDenseMatMul(
        a_indices=onehot_indices, a_values=tf.ones(tf.reshape(count, [1]), grad.dtype),
        a_shape=tf.stack([count, tf.cast(rows, tf.int64)]), b=flat, adjoint_a=True)
    return tf.reshape(summed, tf.concat([[tf.cast(rows, tf.int32)], tf.shape(grad)[1:]], axis=0))


def _in_place(variable, after: tf.Tensor) -> list[tf.Operation]:
    """Ops that let the next dense update of `variable`, once `after` is computed, write into its buffer."""
    with tf.control_dependencies([after]):
        return [tf.raw_ops.DisableCopyOnRead(resource=variable.handle)]


def _on_cpu(device: str) -> bool:
    """Whether a variable placed on `device` (maybe unspecified) lives on a CPU."""
    kind = tf.DeviceSpec.from_string(device or "").device_type
    if kind:
        return kind.upper() == "CPU"
    return not tf.config.list_physical_devices("GPU")


_PATCH = ContextPatch(_ADAM, "_resource_apply_sparse_duplicate_indices", _apply_rows_densely)


@contextlib.contextmanager
def fused_sparse_adam(enabled: bool = True) -> Iterator[None]:
    """While open, v1 AdamOptimizer applies sparse gradients with the fused dense kernel (see the module doc)."""
    with _PATCH.applied() if enabled else contextlib.nullcontext():
        yield
