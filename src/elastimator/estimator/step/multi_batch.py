"""Several evaluation batches per session call, in a long evaluation.

An evaluation runs its metrics' update ops once per batch, one session call
each. The call around a batch costs little next to a DeepFM batch and a real
share of a small model's, more so through hooks
(bench/results/eval_batches_per_call.md). A loop of copies of the batch
(multi_step's copy: every op the updates run, back to the input iterator and
the variables, which are shared) runs several batches per call instead.
Building it costs a few hundred batches of a small model, which they pay back
(docs/performance.md). So an evaluation runs one batch per call
until `FEW_BATCHES` have run (in this call, or in earlier calls of a kept
graph), then builds the loop once and runs up to `PER_CALL` batches per call
from there on (a kept graph keeps it for its later calls).

Hooks. A call of the loop runs copies of the batch only, so a hook that fetches
or feeds anything in a call (`before_run`), or counts calls (`after_run`),
would see a call of several batches as one; the evaluation then keeps one batch
per call, as tf.estimator ran it. A hook that overrides neither acts once (the
dataset's initializer, FinalOpsHook), whatever a call runs.

Counting. The batch's updates end by incrementing the graph's eval step (the
local variable of `tf.compat.v1.GraphKeys.EVAL_STEP` that 2.15's evaluation
counted batches with, made here as there), after the batch's other updates: a
call the input ends part way through has counted exactly the batches it ran.
(2.15 incremented it beside the updates, so the call that found the input
ended counted one more.)
Metric values are those of one batch per call: the loop's iterations run one
after another (parallel_iterations=1).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Iterable

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.estimator import tf_internals
from elastimator.estimator.step import multi_step, steps_per_call

logger = logging.getLogger("elastimator")

FEW_BATCHES = 300
"""Batches run one per call before the loop is built (which they then pay back)."""
PER_CALL = 20
"""The most batches one call of the loop runs."""


def eval_step() -> tf.Variable:
    """The current graph's eval step (GraphKeys.EVAL_STEP), made as 2.15's evaluation made it when the model made
    none: a local int64 variable named eval_step."""
    graph = tf.compat.v1.get_default_graph()
    steps = graph.get_collection(tf.compat.v1.GraphKeys.EVAL_STEP)
    if len(steps) > 1:
        raise ConfigError(f"The graph has {len(steps)} tensors in tf.compat.v1.GraphKeys.EVAL_STEP; an evaluation "
                          "counts its batches with one. Add one eval step to that collection at most.")
    if steps:
        return steps[0]
    return tf.compat.v1.get_variable(
        "eval_step", shape=[], dtype=tf.int64, initializer=tf.compat.v1.zeros_initializer(), trainable=False,
        collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES, tf.compat.v1.GraphKeys.EVAL_STEP])


def counted(updates: Iterable, step: tf.Variable) -> tf.Operation:
    """One batch's op: the metrics' `updates`, then the eval step's increment."""
    with tf.control_dependencies(list(updates)):
        return tf.group(step.assign_add(1, read_value=False), name="eval_update")


def allows_several_batches(hook) -> bool:
    """Whether `hook` acts the same when a call runs several batches: it overrides neither `before_run` nor
    `after_run` (the dataset's initializer, FinalOpsHook), so it acts once, not per call."""
    return steps_per_call.acts_on_no_call(hook)


@dataclasses.dataclass(frozen=True)
class BatchLoop:
    """A loop of `size` copies of an evaluation batch."""

    run: tf.Operation
    """Runs `size` batches, one after another."""
    size: tf.Tensor
    """The batches the next call runs (feed it)."""
    ops: int
    """The batch's ops (each copied into the loop)."""


def build(update: tf.Operation) -> BatchLoop:
    """Builds the loop of `update`'s batch in the current graph; ConfigError where the batch cannot be copied
    (TF1 control flow)."""
    ops = multi_step.step_ops([update])
    size = tf.compat.v1.placeholder(tf.int32, [], name="batch_loop/size")

    def body(i):
        copies = multi_step.copy_ops(ops)
        with tf.control_dependencies([copies[update]]):
            return i + 1

    run = multi_step.v1_while_loop(lambda i: i < size, body, [tf.constant(0)], name="batch_loop")
    return BatchLoop(run=run.op, size=size, ops=len(ops))


def build_in(graph: tf.Graph, update: tf.Operation) -> BatchLoop | None:
    """Builds the loop in a finalized `graph` that a session runs (finalized again after), or None where the
    batch cannot be copied (one batch per call then goes on)."""
    tf_internals.unfinalize(graph)  # the loop joins the running graph
    try:
        with graph.as_default():
            loop = build(update)
    except ConfigError as error:  # TF1 control flow in the batch
        logger.debug("Evaluation keeps one batch per session call: %s", error)
        return None
    except Exception as error:  # noqa: BLE001 - the loop only saves time: the evaluation goes on without it
        logger.warning("Evaluation keeps one batch per session call: copying the batch into a loop failed (%s: %s).",
                       type(error).__name__, error)
        return None
    finally:
        graph.finalize()
    logger.info("Evaluation runs up to %d batches per session call from here on (a loop of the batch's %d ops).",
                PER_CALL, loop.ops)
    return loop


def run(one: Callable[[], object], several: Callable[[], Callable[[int], object] | None], ran_before: int,
        most: int | None = None, should_stop: Callable[[], bool] = lambda: False) -> None:
    """Runs batches until the input ends, `most` have run, or `should_stop()`: one per call (`one()`) until
    `ran_before` and those run here reach FEW_BATCHES, then through `several()`, which returns a call of `size`
    batches (building the loop if need be), or None to go on with one per call."""
    done, call, tried = 0, None, False
    while (most is None or done < most) and not should_stop():
        if not tried and ran_before + done >= FEW_BATCHES:
            call, tried = several(), True
        size = 1 if call is None else PER_CALL if most is None else min(PER_CALL, most - done)
        try:
            if call is None:
                one()
            else:
                call(size)
        except tf.errors.OutOfRangeError:  # the eval step has counted the batches run
            return
        done += size
