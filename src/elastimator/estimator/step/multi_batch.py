"""Several evaluation batches per session call, in a long evaluation of a kept graph.

An evaluation runs its metrics' update ops once per batch, one session call
each. The call around a batch costs little next to a DeepFM batch and a real
share of a small model's (bench/results/eval_batches_per_call.md). A loop of
copies of the batch (multi_step's copy: every op the updates run, back to the
input iterator and the variables, which are shared) runs several batches per
call instead; building it costs about 35 ms for that benchmark's 170 ops, which
a few hundred batches pay back.

So an evaluation in a kept graph (warm_graphs: no hooks of any kind) runs one
batch per call until `FEW_BATCHES` have run in that graph, then builds the loop
once and runs up to `PER_CALL` batches per call from there on, in that call and
every later call of the graph. Evaluations with hooks run one batch per call,
as tf.estimator ran them, so every hook acts where it acted there.

Metric values are those of one batch per call: the loop's iterations run one
after another (parallel_iterations=1), each batch's updates as the graph orders
them. A call the input ends part way through keeps the batches it ran, and a
counter the loop increments after each batch says how many.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.estimator.step import multi_step

logger = logging.getLogger("elastimator")

FEW_BATCHES = 300
"""Batches a kept evaluation graph runs one per call before it builds the loop (which then pays back)."""
PER_CALL = 20
"""The most batches one call of the loop runs."""


@dataclasses.dataclass(frozen=True)
class BatchLoop:
    """A loop of `size` copies of an evaluation batch."""

    run: tf.Operation
    """Runs `size` batches, one after another."""
    size: tf.Tensor
    """The batches the next call runs (feed it)."""
    batches: tf.Tensor
    """How many batches the loop has run in this session, ever (a read of its counter)."""
    initializer: tf.Operation
    """Sets the counter to 0; run it once in the session."""
    ops: int
    """The batch's ops (each copied into the loop)."""


def build(update: tf.Operation) -> BatchLoop:
    """Builds the loop of `update`'s batch in the current graph; ConfigError where the batch cannot be copied
    (TF1 control flow)."""
    ops = multi_step.step_ops([update])
    counter = tf.compat.v1.Variable(0, dtype=tf.int64, trainable=False, collections=[], name="batch_loop/batches")
    size = tf.compat.v1.placeholder(tf.int32, [], name="batch_loop/size")

    def body(i):
        copies = multi_step.copy_ops(ops)
        with tf.control_dependencies([copies[update]]):
            counted = counter.assign_add(1, read_value=False)
        with tf.control_dependencies([counted]):
            return i + 1

    run = multi_step.v1_while_loop(lambda i: i < size, body, [tf.constant(0)], name="batch_loop")
    return BatchLoop(run=run.op, size=size, batches=counter.read_value(), initializer=counter.initializer,
                     ops=len(ops))


def build_in(graph: tf.Graph, session: tf.compat.v1.Session, update: tf.Operation) -> BatchLoop | None:
    """Builds the loop in a finalized `graph` whose `session` is running (the graph finalized again after), or
    None where the batch cannot be copied (it then keeps one batch per call)."""
    graph._unsafe_unfinalize()  # pylint: disable=protected-access  (the loop joins the kept graph)
    try:
        with graph.as_default():
            loop = build(update)
    except ConfigError as error:
        logger.debug("Evaluation keeps one batch per session call: %s", error)
        return None
    finally:
        graph.finalize()
    session.run(loop.initializer)
    logger.info("Evaluation runs up to %d batches per session call from here on (a loop of the batch's %d ops).",
                PER_CALL, loop.ops)
    return loop


def run(session: tf.compat.v1.Session, update: tf.Operation, loop: Callable[[], BatchLoop | None],
        ran_before: int, most: int | None = None) -> int:
    """Runs `update` until the input ends (or `most` batches): one batch per call until the graph has run
    FEW_BATCHES (`ran_before` in its earlier calls, and those run here), then through `loop()`, which builds the
    loop or returns it (None: one batch per call goes on). Returns the batches run."""
    one = session.make_callable(update)
    done = 0
    while most is None or done < most:
        if ran_before + done >= FEW_BATCHES:
            batch_loop = loop()
            if batch_loop is not None:
                return done + _run_loop(session, batch_loop, None if most is None else most - done)
        try:
            one()
        except tf.errors.OutOfRangeError:
            break
        done += 1
    return done


def _run_loop(session: tf.compat.v1.Session, loop: BatchLoop, most: int | None) -> int:
    """Runs calls of up to PER_CALL batches until the input ends (or `most` batches); the batches run."""
    call = session.make_callable(loop.run, feed_list=[loop.size])
    start = int(session.run(loop.batches))
    done = 0
    while most is None or done < most:
        size = PER_CALL if most is None else min(PER_CALL, most - done)
        try:
            call(size)
        except tf.errors.OutOfRangeError:  # part way through a call: the counter has its batches
            break
        done += size
    return int(session.run(loop.batches)) - start
