"""`make_stop_at_checkpoint_step_hook`: the chief stops at a global step; every other trainer stops once the
chief's checkpoint of that step exists (as tf.estimator.experimental's did)."""

from __future__ import annotations

import time
from typing import Callable

import tensorflow as tf

from elastimator.estimator import CheckpointDir


class StopAtCheckpointStepHook(tf.compat.v1.train.SessionRunHook):
    """Requests a stop once model_dir holds a checkpoint of `last_step` or later, looking every
    `wait_after_file_check_secs`."""

    def __init__(self, model_dir: str, last_step: int, wait_after_file_check_secs: float = 30,
                 clock: Callable[[], float] = time.monotonic):
        self._model_dir, self._last_step = model_dir, last_step
        self._wait_secs, self._clock = wait_after_file_check_secs, clock
        self._next_check = 0.0

    def before_run(self, run_context):
        now = self._clock()
        if now < self._next_check:
            return
        self._next_check = now + self._wait_secs
        step = CheckpointDir(self._model_dir).newest_step()
        if step >= self._last_step:
            run_context.request_stop()


def make_stop_at_checkpoint_step_hook(estimator, last_step, wait_after_file_check_secs=30):
    """A StopAtStepHook(last_step) for the chief; for other trainers, a hook that stops once the chief's
    checkpoint of `last_step` is in `estimator.model_dir`."""
    if estimator.config.is_chief:
        return tf.compat.v1.train.StopAtStepHook(last_step=last_step)
    return StopAtCheckpointStepHook(estimator.model_dir, last_step, wait_after_file_check_secs)
