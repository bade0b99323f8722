"""The session hooks the engine adds on its own."""

from __future__ import annotations

import logging
import time

import numpy as np
import tensorflow as tf

from elastimator.errors import NanLossError
from elastimator.estimator.saving import checkpoints
from elastimator.estimator.step.training_step import StepHook

logger = logging.getLogger("elastimator")


class NanLossHook(tf.compat.v1.train.SessionRunHook):
    """Stops training with `NanLossError` when the loss is NaN or infinite.

    Put it before the checkpoint saver in the hook list: its `after_run` then
    raises before the saver could write the broken weights, so the newest
    checkpoint on disk is the last good one.
    """

    def __init__(self, loss: tf.Tensor, global_step: tf.Tensor, model_dir: str):
        self._loss, self._step, self._model_dir = loss, global_step, model_dir

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs([self._loss, self._step])

    def after_run(self, run_context, run_values):
        loss, step = run_values.results
        if np.isfinite(loss):
            return
        last = checkpoints.CheckpointDir(self._model_dir).newest()
        kept = f"The last good checkpoint, {last}, is intact." if last else "No checkpoint had been written yet."
        raise NanLossError(
            f"Loss became {loss} at global step {step}; training stopped. {kept} "
            "Typical fixes: a lower learning rate, gradient clipping, or checking the input for NaN/inf values."
        )


class ProgressLogHook(tf.compat.v1.train.SessionRunHook):
    """Logs the step, loss and steps/s at the first step and then at each multiple of `every_n_steps`
    (or the first step past it, when a session call runs several steps or other workers share the step)."""

    def __init__(self, loss: tf.Tensor, global_step: tf.Tensor, every_n_steps: int):
        self._loss, self._step, self._every = loss, global_step, every_n_steps
        self._last_step: int | None = None
        self._last_time = 0.0

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs([self._loss, self._step])

    def after_run(self, run_context, run_values):
        loss, step = run_values.results
        now = time.perf_counter()
        if self._last_step is None:
            self._last_step, self._last_time = step, now
            logger.info("step %d: loss = %.6g", step, loss)
            return
        if step // self._every > self._last_step // self._every:
            rate = (step - self._last_step) / max(now - self._last_time, 1e-9)
            logger.info("step %d: loss = %.6g (%.1f steps/s)", step, loss, rate)
            self._last_step, self._last_time = step, now


class StopAfterStepsHook(tf.compat.v1.train.SessionRunHook):
    """Requests a stop after `num_steps` session runs (used for evaluation steps)."""

    def __init__(self, num_steps: int):
        self._num_steps, self._done = num_steps, 0

    def after_run(self, run_context, run_values):
        self._done += 1
        if self._done >= self._num_steps:
            run_context.request_stop()


def check_hooks(name: str, hooks, error: type[Exception] = TypeError, training: bool = False) -> list:
    """Returns `hooks` as a list, raising `error` if any is not a SessionRunHook (or, for training, a StepHook)."""
    hooks = list(hooks or [])
    kinds = (tf.compat.v1.train.SessionRunHook, StepHook) if training else tf.compat.v1.train.SessionRunHook
    for hook in hooks:
        if not isinstance(hook, kinds):
            raise error(f"{name} must be tf.compat.v1.train.SessionRunHook instances; got {type(hook).__name__}.")
    return hooks

