"""The session hooks the engine adds on its own."""

from __future__ import annotations

import logging
import time

import numpy as np
import tensorflow as tf

from elastimator.errors import NanLossError
from elastimator.estimator import log_lines
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
    """Logs the loss and global step at a train call's first step and then `every_n_steps` after the last line
    (or at the first step past that, when a session call runs several steps or other workers share the step), as
    2.15's LoggingTensorHook and TensorFlow's StepCounterHook count (a call resumed at step 250 logs 250, 350).

    Where TensorFlow's logger prints INFO lines (the program set `tf.compat.v1.logging.set_verbosity(INFO)`),
    as 2.15's `loss = ..., step = ... (0.275 sec)` through it; else as elastimator's own line (`step 100: loss =
    0.17 (850.2 steps/s)`, what the command line shows). It fetches what `NanLossHook` fetches in every call
    anyway (the session fetches a tensor once), and nothing while neither logger would print the line.
    """

    def __init__(self, loss: tf.Tensor, global_step: tf.Tensor, every_n_steps: int):
        self._fetches = [loss, global_step]
        self._every = every_n_steps
        self._last_step: int | None = None
        self._last_time = 0.0

    def begin(self):
        self._last_step = None

    def before_run(self, run_context):
        if not (log_lines.shown() or logger.isEnabledFor(logging.INFO)):
            return None
        return tf.compat.v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        if run_values.results is None:
            return
        loss, after = run_values.results
        step = after - 1  # the step the loss was computed at (2.15's line showed the global step before the update)
        now = time.perf_counter()
        if self._last_step is None:
            self._last_step, self._last_time = step, now
            self._log(loss, step, None)
        elif step - self._last_step >= self._every:
            self._log(loss, step, (step - self._last_step, now - self._last_time))
            self._last_step, self._last_time = step, now

    @staticmethod
    def _log(loss, step, since: tuple[int, float] | None) -> None:
        """`since`: the steps and seconds since the last line (None for a call's first)."""
        if log_lines.shown():
            log_lines.loss_at_step(loss, step, None if since is None else since[1])
        elif since is None:
            logger.info("step %d: loss = %.6g", step, loss)
        else:
            logger.info("step %d: loss = %.6g (%.1f steps/s)", step, loss, since[0] / max(since[1], 1e-9))


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

