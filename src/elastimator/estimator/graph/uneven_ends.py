"""Ending a synchronous step together when the workers' inputs end at different steps.

Under MultiWorkerMirroredStrategy every worker takes part in every step's all-reduce: a worker whose input
ended while the others still have batches cannot simply stop (tf.estimator 2.15 hung there, the others waiting
in the collective for it). So each worker's dataset goes on past its end:

* `padded(dataset)` yields `(element, True)` for each real element, then, forever, `(filler, False)`: the last
  real element again, with any step outputs (`StepInput.step_outputs`, the shard tag) emptied, so a hook reports
  nothing for it. A worker that has no real element at all fills with empty batches (batch dimension 0), whose gradients are zeros; the loss
  it reports for them is 0 (`unless_empty`), not the NaN of a mean over nothing.
* `every_worker_ended(flag, strategy)` all-reduces the flags of one step: it fails the step with
  `OutOfRangeError`, on every worker at once, when no worker had a real element, and the training ends there as
  a single process's does at the end of its input.

A worker whose input ended early thus trains its last batch again while the others finish: at most as many
steps as the longest remaining input, a replay the docs state (for the shard service, at most one shard per
worker at the end of the job).
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from elastimator.estimator.step.training_step import StepInput


def padded(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset`'s elements as `(element, True)`, then `(filler, False)` forever (see the module doc)."""
    spec = dataset.element_spec
    empty = tf.nest.map_structure(_empty, spec)
    real = dataset.map(lambda *element: (_one(element), tf.constant(True)))
    endless = real.concatenate(tf.data.Dataset.from_tensors((empty, tf.constant(False))).repeat())

    def step(last, item):
        element, is_real = item
        kept = tf.nest.map_structure(lambda new, old: tf.cond(is_real, lambda: new, lambda: old), element, last)
        return kept, (tf.cond(is_real, lambda: element, lambda: _without_step_outputs(kept)), is_real)

    return endless.scan(empty, step)


def every_worker_ended(is_real: Any, strategy: Any) -> tf.Tensor:
    """A boolean that is True while some worker's element of this step is real; computing it fails the step with
    `OutOfRangeError` once none is (on every worker, since all of them all-reduce the same flags)."""
    with tf.name_scope("every_worker_ended"):
        flags = strategy.extended.call_for_each_replica(lambda flag: tf.cast(flag, tf.float32), args=(is_real,))
        count = strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)
        ended = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(0)).get_next
        return tf.cond(count > 0, lambda: tf.constant(True), lambda: tf.cast(ended(), tf.bool))


def unless_empty(loss: tf.Tensor, features: Any) -> tf.Tensor:
    """A replica's loss as the step reports it: 0 for a batch of no rows (a worker that never had an element),
    whose mean is NaN and would read as a failed training. Its gradients are zeros: it trains nothing."""
    rows = [tf.shape(t)[0] for t in tf.nest.flatten(features) if isinstance(t, tf.Tensor) and t.shape.rank]
    if not rows:
        return loss
    return tf.where(rows[0] > 0, loss, tf.zeros_like(loss))


def _one(element: tuple) -> Any:
    """The element a dataset's map gets unpacked into `*element`, packed again."""
    return element[0] if len(element) == 1 else element


def _empty(spec: tf.TensorSpec) -> tf.Tensor:
    """A value of `spec` with no rows (dimension 0 first; unknown dimensions 0)."""
    if not isinstance(spec, tf.TensorSpec):
        raise TypeError(f"a synchronous strategy over several workers pads their inputs' ends; it pads dense "
                        f"tensors, and the input yields a {type(spec).__name__}. Make it a dense tensor in the "
                        "input_fn (tf.sparse.to_dense).")
    dims = [0 if d is None else d for d in spec.shape.as_list()] if spec.shape.rank is not None else [0]
    if dims:
        dims[0] = 0
    return tf.zeros(dims, spec.dtype)


def _without_step_outputs(element: Any) -> Any:
    if not isinstance(element, StepInput):
        return element
    return StepInput(element.features, element.labels,
                     {name: value[:0] for name, value in element.step_outputs.items()})
