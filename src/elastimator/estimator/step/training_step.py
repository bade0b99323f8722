"""What a training step takes in besides features and labels, and what it hands to hooks.

An input may declare **step outputs**: per-batch tensors that a hook needs for
the step that trained that batch (the elastic input's shard tag is one). Its
dataset yields `StepInput(features, labels, step_outputs)` instead of
`(features, labels)`. The engine gives model_fn the features and labels only,
and the built graph (`ModelGraph.step_outputs`) carries the step outputs.

The training verb then describes one session call as a `TrainingStep`: its
loss, the global step after it, and each step output stacked over the call's
steps (one row per step, `[k, ...]`, whatever `steps_per_execution` is). Hooks
that need these tensors are passed as `StepHook(build)`, and the verb builds
them from the `TrainingStep`: nothing is looked up in graph collections.

    data (StepInput) -> ModelGraph.step_outputs -> multi_step (stacks, unaware of meaning) -> TrainingStep
        -> StepHook.build(step) -> the hook fetches step.outputs["shard_tag"] with the train op
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple

import tensorflow as tf


class StepInput(NamedTuple):
    """An input element that declares step outputs next to its features and labels."""

    features: Any
    labels: Any
    step_outputs: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class TrainingStep:
    """The tensors one training session call produces, for hooks to fetch with it."""

    loss: tf.Tensor
    """The loss of the call's last step."""
    global_step: tf.Tensor
    """The global step once the call's steps have run."""
    outputs: Mapping[str, tf.Tensor]
    """Each declared step output, one row per step the call ran: `[k, ...]`."""
    finished_outputs: Mapping[str, tf.Tensor] = dataclasses.field(default_factory=dict)
    """For a call of several steps that fails part way (its input ran out): the rows of the steps that did run,
    to be read in the hook's `end()`. Empty with one step per call, where a failed call trained nothing."""
    train_op: tf.Operation | None = None
    """The op each call runs: what it writes is the call's training (a hook may hold those writes,
    elastimator.estimator.step.write_gate)."""


@dataclasses.dataclass(frozen=True)
class StepHook:
    """A hook that needs the training step's tensors: the training verb calls `build(step)` once the graph is
    built, e.g. `StepHook(lambda step: ReportHook(step.outputs["shard_tag"]))`."""

    build: Callable[[TrainingStep], tf.compat.v1.train.SessionRunHook]
    several_steps_per_call: bool = True
    """Whether the hook it builds behaves the same when a call runs several steps (it sees every step's
    outputs either way); False keeps automatically sized training at one step per call
    (elastimator.estimator.step.steps_per_call)."""


def single(train_op, loss: tf.Tensor, global_step: tf.Tensor, step_outputs: Mapping[str, tf.Tensor]) -> TrainingStep:
    """The TrainingStep of a call that runs one step: each output as a one-row stack."""
    outputs = {name: tf.expand_dims(value, 0, name=f"step_outputs/{name}") for name, value in step_outputs.items()}
    return TrainingStep(loss=loss, global_step=global_step, outputs=outputs, train_op=as_op(train_op))


def as_op(train_op) -> tf.Operation:
    """A model_fn's train_op as an Operation (it may return a Tensor)."""
    return train_op if isinstance(train_op, tf.Operation) else train_op.op


WITHDRAWN = "elastimator: the input withdrew the batch of this step before the step wrote anything"


def withdraw_unless(keep: tf.Tensor) -> tf.Operation:
    """An op that fails its call when `keep` is False: the batch the input gave is not to be trained (its
    shard went to another process, say). Ops that wait for it do not run; the training loop goes on."""
    return tf.raw_ops.Assert(condition=keep, data=[tf.constant(WITHDRAWN)], name="withdrawn_batch")


def is_withdrawn(error: tf.errors.OpError) -> bool:
    """Whether a training call failed because its input withdrew the batch (`withdraw_unless`)."""
    return isinstance(error, tf.errors.InvalidArgumentError) and WITHDRAWN in (error.message or "")


def build_hooks(hooks, step: TrainingStep) -> list:
    """`hooks` with each StepHook replaced by the hook it builds from `step`."""
    return [hook.build(step) if isinstance(hook, StepHook) else hook for hook in hooks]
