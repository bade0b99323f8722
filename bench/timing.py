"""Timing the training steps of a benchmark run, after its warm-up."""

from __future__ import annotations

import time

import tensorflow as tf


class WindowTimer(tf.compat.v1.train.SessionRunHook):
    """Times the steps after the first `warmup` ones."""

    def __init__(self, warmup: int):
        self.warmup, self.steps, self.start, self.stop = warmup, 0, None, None

    def after_run(self, run_context, run_values):
        self.steps += 1
        now = time.perf_counter()
        if self.steps == self.warmup:
            self.start = now
        self.stop = now

    def rate(self, batch_size: int = 1) -> float:
        """Steps (or, with batch_size, examples) per second after the warm-up."""
        return (self.steps - self.warmup) * batch_size / (self.stop - self.start)
