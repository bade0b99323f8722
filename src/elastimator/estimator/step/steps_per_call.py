"""How many training steps a session call runs when `RunConfig.steps_per_execution` is None (the default).

A session call costs a fixed amount besides its ops: the hooks' Python and the
executor's set-up. Next to a large step it is noise (bench/results/step_profile.md),
but in a step of a small model it can be most of the call. Several steps per call
(elastimator.estimator.step.multi_step) pay it once for all of them, so by
default training runs them wherever that changes nothing a user can see:

- Every hook of the training acts on the global step, not on the number of
  session calls: elastimator's own, TensorFlow's step-based ones (checkpoint
  saver, step counter, stop-at-step, summary saver, NaN check, step waiter,
  final ops, a profiler that traces every so many steps), a hook that overrides
  neither `before_run` nor `after_run`, or one that says so with a class
  attribute `several_steps_per_call = True`. Calls are cut so that each of
  TensorFlow's hooks acts on exactly the step it acted on with one step per call
  (`hook_steps`). Anything else (a LoggingTensorHook counting calls, a FeedFnHook
  feeding each step, a user's own per-step hook) gets one step per call, exactly
  as before.
- The step can be copied into a loop: no TF1 control flow, step outputs with
  static shapes.
- Training is long enough to pay for the loop: a call with `steps` (or
  `max_steps` minus the restored step) under `FEW_STEPS` runs one step per call.
- The process trains alone. In a cluster, other trainers move the global step
  between this one's calls, and a call planned for several steps could pass
  `max_steps` by that many (set `steps_per_execution` to choose it there).

Calls are then sized by pace (`Pace`): the first runs one step, and each next
one about `CALL_SECS` of steps at the pace of the call before, at most
`MOST_STEPS`. A step of a second or more runs alone, so hooks, Ctrl-C and logs
react as fast as with one step per call; a 10 ms step runs twenty to a call.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.estimator.step import hook_steps
from elastimator.estimator.step.training_step import StepHook

MOST_STEPS = 20
"""The most steps one automatically sized call runs."""
CALL_SECS = 0.2
"""About how long an automatically sized call lasts."""
FEW_STEPS = 200
"""Below this many steps to train, calls run one step: the loop's graph building and first optimization per
`train` call are not paid back by fewer steps (bench/results/loop_break_even.md, docs/performance.md)."""

_STEP_BASED = (
    tf.compat.v1.train.CheckpointSaverHook,
    tf.compat.v1.train.StepCounterHook,
    tf.compat.v1.train.StopAtStepHook,
    tf.compat.v1.train.NanTensorHook,
    tf.compat.v1.train.GlobalStepWaiterHook,
    tf.compat.v1.train.FinalOpsHook,
    tf.compat.v1.train.SummarySaverHook,
)
_BASE = tf.compat.v1.train.SessionRunHook


def allows_several_steps(hook) -> bool:
    """Whether `hook` behaves the same when a session call runs several steps (see the module doc)."""
    if isinstance(hook, StepHook):
        return hook.several_steps_per_call
    declared = getattr(hook, "several_steps_per_call", None)
    if declared is not None:
        return bool(declared)
    if isinstance(hook, _STEP_BASED):
        return True
    if isinstance(hook, tf.compat.v1.train.ProfilerHook):  # a trace of several steps is not what it asked for,
        return hook_steps.every_steps(hook) is not None  # unless its steps are planned to be calls of their own
    return acts_on_no_call(hook)


def acts_on_no_call(hook) -> bool:
    """Whether `hook` overrides neither `before_run` nor `after_run`: whatever a session call runs, it sees none."""
    kind = type(hook)
    return kind.before_run is _BASE.before_run and kind.after_run is _BASE.after_run


def why_one_step(*, hooks: Iterable, check_step: Callable[[], object], steps_to_train: int | None,
                 in_cluster: bool = False) -> str | None:
    """Why automatic sizing must keep one step per call, or None when several are fine.

    Args:
        hooks: every hook the training runs that elastimator did not make for itself (StepHooks included).
        check_step: raises ConfigError when the step cannot be copied into a loop.
        steps_to_train: how many steps this call of `train` runs at most; None when the input decides.
        in_cluster: whether other trainers share the global step.
    """
    if in_cluster:
        return ("other trainers move the global step between this one's calls, so a call of several steps could "
                "pass max_steps by that many")
    return few_steps(steps_to_train) or hook_needing_one_step(hooks) or not_copyable(check_step)


def few_steps(steps_to_train: int | None) -> str | None:
    """Why a call of `steps_to_train` steps (None: the input decides) is too short to pay back a loop, or None."""
    if steps_to_train is not None and steps_to_train < FEW_STEPS:
        return f"training runs {steps_to_train} steps, fewer than the {FEW_STEPS} a loop of steps pays back"
    return None


def hook_needing_one_step(hooks: Iterable) -> str | None:
    """Why one of `hooks` needs one step per session call (`allows_several_steps`), or None."""
    for hook in hooks:
        if not allows_several_steps(hook):
            name = type(hook).__name__
            return (f"hook {name} runs per session call (mark its class several_steps_per_call = True if it acts "
                    "on the global step, not on the number of calls)")
    return None


def not_copyable(check_step: Callable[[], object]) -> str | None:
    """Why the step cannot be copied into a loop (what `check_step` raises), or None."""
    try:
        check_step()
    except ConfigError as error:
        return str(error)
    return None


class Pace:
    """Sizes automatically sized calls: about `call_secs` each, at the pace of the previous call."""

    def __init__(self, most_steps: int = MOST_STEPS, call_secs: float = CALL_SECS,
                 clock: Callable[[], float] = time.perf_counter):
        self._most, self._call_secs, self._clock = most_steps, call_secs, clock
        self._secs_per_step: float | None = None
        self._started: float | None = None

    def next_size(self) -> int:
        """The most steps the next call should run (1 until a call has been timed)."""
        if self._secs_per_step is None:
            return 1
        return max(1, min(self._most, int(self._call_secs / max(self._secs_per_step, 1e-9))))

    def started(self) -> None:
        self._started = self._clock()

    def finished(self, steps_run: int) -> None:
        if self._started is not None and steps_run > 0:
            self._secs_per_step = (self._clock() - self._started) / steps_run
        self._started = None


def describe(reason: str | None) -> str:
    """The log line saying how automatically sized calls are sized (`reason`: why_one_step's answer)."""
    if reason is not None:
        return f"Training runs one step per session call: {reason}."
    return (f"Training runs up to {MOST_STEPS} steps per session call, about {CALL_SECS:g} s each "
            "(RunConfig.steps_per_execution=None; calls end where a hook acts, and hooks see each call's last "
            "step).")


def steps_to_train(steps: int | None, max_steps: int | None, restored_step: int) -> int | None:
    """At most how many steps `train(steps=, max_steps=)` runs from `restored_step`."""
    if steps is not None:
        return steps
    if max_steps is not None:
        return max(0, max_steps - restored_step)
    return None

