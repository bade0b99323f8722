"""Training progress for people: a live bar on a terminal, periodic lines otherwise."""

from __future__ import annotations

import collections
import logging
import os
import sys
import time
from typing import TextIO

import tensorflow as tf

from elastimator.estimator import StepHook, TrainingStep
from elastimator.cluster import pod_budget, progress_file

logger = logging.getLogger("elastimator")
_BAR = 24


def format_duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def progress_line(step: int, total: int | None, rate: float | None, loss: float | None, width: int = _BAR) -> str:
    """One status line, e.g. `step 1200/5000 [#####.....]  24% 85.3 steps/s loss 0.4120 ETA 0:00:44`; without a
    measured pace yet (`rate` None), neither steps/s nor ETA."""
    parts = [f"step {step}" + (f"/{total}" if total else "")]
    if total:
        done = min(1.0, step / total)
        filled = int(done * width)
        parts.append(f"[{'#' * filled}{'.' * (width - filled)}] {done:4.0%}")
    if rate is not None:
        parts.append(f"{rate:.1f} steps/s")
    if loss is not None:
        parts.append(f"loss {loss:.4f}")
    if total and rate:
        parts.append(f"ETA {format_duration((total - step) / rate)}")
    return " ".join(parts)


RATE_WINDOW_SECS = 10.0
"""Steps/s and the ETA come from the last this many seconds of steps, not from the start (the first calls,
which build and warm up, made a one-minute job's first ETA read over an hour)."""
WINDOW_CALLS = 5
"""However long ago, the last this many calls stay in the window: their median pace outlasts one long pause."""
MIN_MEASURED_CALLS = 3
"""Calls after the first before a pace is shown: the second call alone (a step after the first checkpoint) made
a 35-second job's first line read ETA 0:46:55."""


class ProgressHook(tf.compat.v1.train.SessionRunHook):
    """Shows step, loss, steps/s and ETA.

    On a terminal the line is redrawn in place (at most 4 times a second), and a log line printed to the same
    terminal meanwhile first clears it (the bar comes back at the next redraw), so the two never run into each
    other; elsewhere (CI logs, files) one line is written every `every_secs` seconds, and the last once.
    Built from the training step: `StepHook(lambda step: ProgressHook(step, total))`.
    """

    def __init__(self, step: TrainingStep, total_steps: int | None, stream: TextIO | None = None,
                 every_secs: float = 10.0, clock=time.perf_counter):
        self._fetches = {"step": step.global_step, "loss": step.loss}
        self._total = total_steps
        self._stream = stream or sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._every = 0.25 if self._tty else every_secs
        self._clock = clock
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        """(time, step) after recent calls, the first call's left out."""
        self._last_step: int | None = None
        self._last_loss: float | None = None
        self._last_shown = 0.0
        self._shown_step: int | None = None
        self._calls = 0
        self._clear_filter = _ClearLineFirst(self._stream) if self._tty else None
        self.last_line = ""

    def begin(self):
        if self._clear_filter is not None:
            self._clear_filter.attach()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        step = self._last_step = int(run_values.results["step"])
        self._last_loss = run_values.results.get("loss")
        now = self._clock()
        self._calls += 1
        if self._calls == 1:  # the first call builds and warms up: its time says nothing of the pace
            self._samples.append((now, step))
            self._last_shown = now  # piped, the first line comes a period after the first step, paced
            return
        self._samples.append((now, step))
        while len(self._samples) > WINDOW_CALLS + 1 and now - self._samples[1][0] >= RATE_WINDOW_SECS:
            self._samples.popleft()
        if now - self._last_shown < self._every:
            return
        self._show(step, now)

    def _rate(self) -> float | None:
        """Steps/s over the recent window: the median of each call's own pace, so one long pause between two
        calls (an evaluation or an export after a checkpoint) does not read as a slow pace; None until
        MIN_MEASURED_CALLS calls are measured."""
        samples = list(self._samples)
        paces = sorted((step - before) / max(now - then, 1e-9)
                       for (then, before), (now, step) in zip(samples, samples[1:]))
        if self._calls <= MIN_MEASURED_CALLS or not paces:
            return None
        middle = len(paces) // 2
        return paces[middle] if len(paces) % 2 else (paces[middle - 1] + paces[middle]) / 2

    def _show(self, step: int, now: float) -> None:
        self._last_shown, self._shown_step = now, step
        loss = None if self._last_loss is None else float(self._last_loss)
        self.last_line = progress_line(step, self._total, self._rate(), loss)
        if self._tty:
            self._stream.write("\r" + self.last_line + "\033[K")
            self._clear_filter.drawn = True
        else:
            self._stream.write(self.last_line + "\n")
        self._stream.flush()

    def end(self, session):
        if self._last_step is not None and (self._tty or self._shown_step != self._last_step):
            self._show(self._last_step, self._clock())
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()
            self._clear_filter.detach()


class _ClearLineFirst(logging.Filter):
    """On the handlers that print to the progress bar's terminal: clears the bar's line before a record prints,
    so the record starts at the line's beginning."""

    def __init__(self, stream: TextIO):
        super().__init__()
        self._stream = stream
        self._handlers: list[logging.Handler] = []
        self.drawn = False
        """Whether the bar is on the line now."""

    def attach(self) -> None:
        loggers = [logging.getLogger(), logging.getLogger("elastimator"), tf.get_logger()]
        self._handlers = [h for lg in loggers for h in lg.handlers
                          if getattr(h, "stream", None) in (self._stream, sys.stderr, sys.stdout)]
        for handler in self._handlers:
            handler.addFilter(self)

    def detach(self) -> None:
        for handler in self._handlers:
            handler.removeFilter(self)
        self._handlers = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.drawn:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self.drawn = False
        return True


class ProgressFileHook(tf.compat.v1.train.SessionRunHook):
    """Writes the global step to a progress file after the first session call, then every `every_secs`, so a
    supervisor learns that (and how far) this process trains without reading its log."""

    def __init__(self, step: TrainingStep, path: str, every_secs: float = 5.0):
        self._step, self._path, self._every = step.global_step, path, every_secs
        self._next = 0.0
        self._last: int | None = None
        """The global step after the last call (written as "ended" when training ends)."""

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        now = time.monotonic()
        self._last = int(run_values.results)
        if now >= self._next:
            self._next = now + self._every
            progress_file.write(self._path, self._last)

    def end(self, session):
        """Training is over: what the process does next (exports, a final evaluation) is not a stall."""
        if self._last is not None:
            progress_file.write(self._path, self._last, ended=True)


class FirstStepHook(tf.compat.v1.train.SessionRunHook):
    """Marks this start of a task in a pod with a restart budget as one that trained a step
    (cluster/pod_budget.py): a chief's or worker's progress needs a step of its own, as under `launch`."""

    def __init__(self, model_dir: str, task: str):
        self._model_dir, self._task, self._done = model_dir, task, False

    def after_run(self, run_context, run_values):
        if not self._done:
            self._done = True
            pod_budget.mark_stepped(self._model_dir, self._task)


def first_step_hook(model_dir: str, task: str) -> FirstStepHook | None:
    """The hook, where the manifest set a restart budget (ELASTIMATOR_MAX_STRIKES) and the task is a trainer."""
    if not os.environ.get(pod_budget.ENV) or task.split("-")[0] not in ("chief", "worker"):
        return None
    return FirstStepHook(model_dir, task)


def progress_file_hook() -> StepHook | None:
    """The progress-file hook, when this process's supervisor asked for one (ELASTIMATOR_PROGRESS_FILE)."""
    path = os.environ.get(progress_file.ENV)
    return StepHook(lambda step: ProgressFileHook(step, path)) if path else None
