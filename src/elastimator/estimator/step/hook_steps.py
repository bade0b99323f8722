"""At which global step a training hook acts next, so that a session call of several steps never runs past it.

tf.estimator ran one step per session call, so TensorFlow's step-based hooks
acted on exact steps: StopAtStepHook stops at its last step, a
CheckpointSaverHook saves every `save_steps` after the step it first saved at, a
SummarySaverHook writes the step after each interval. With several steps per call
(`multi_step`), the plan asks each hook where it acts next and sizes the call so
that it acts on the same step:

- a hook that decides after the call, from the step it ended on (stop at step,
  checkpoint saver, step counter), needs a call that *ends* on that step;
- a hook that decides before the call, from the step the call's first step will
  reach (summary saver, profiler), needs that step to be a call of its own,
  so the call before ends one step earlier.

A hook that acts every so many seconds has no step to plan for; one of another
kind is not planned for here (`steps_per_call` keeps such hooks at one step per
call). The timers read here are TensorFlow's own: the SecondOrStepTimer each of
these hooks keeps (its interval and the step it last acted on), and
StopAtStepHook's last step, which it resolves when its session is created.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import tensorflow as tf

from elastimator.estimator import tf_internals

_train = tf.compat.v1.train
_DECIDED_AFTER = (_train.CheckpointSaverHook, _train.StepCounterHook)
_DECIDED_BEFORE = (_train.SummarySaverHook, _train.ProfilerHook)


@dataclasses.dataclass(frozen=True)
class Action:
    """Where a hook acts next."""

    step: int
    """The global step a session call ends on when the hook acts."""
    decided_before: bool
    """Whether the hook decides before the call (from its first step), so that step must be a call of its own."""


def every_steps(hook) -> int | None:
    """How many steps apart a timed hook (checkpoint saver, step counter, summary saver, profiler) acts; None when
    it counts seconds. Read from TensorFlow's SecondOrStepTimer, which has no public accessor for it."""
    return tf_internals.timer_every_steps(hook)


def _timer_action(hook, step: int, decided_before: bool) -> Action | None:
    every = every_steps(hook)
    if every is None:
        return None
    last = tf_internals.timer_last_triggered_step(hook)
    # A timer that has not fired yet fires in the next call; one that is due fires at the end of the next call.
    target = step + 1 if last is None else max(last + every, step + 1)
    return Action(target, decided_before)


def next_action(hook, step: int) -> Action | None:
    """Where `hook` acts next, with the global step at `step` before the next call; None when no step is planned."""
    if isinstance(hook, _train.StopAtStepHook):
        last_step = getattr(hook, "_last_step", None)  # set in after_create_session from num_steps
        return None if last_step is None else Action(max(last_step, step + 1), decided_before=False)
    if isinstance(hook, _DECIDED_AFTER + _DECIDED_BEFORE):
        return _timer_action(hook, step, isinstance(hook, _DECIDED_BEFORE))
    return None


def limit(size: int, step: int, hooks: Iterable) -> int:
    """`size` steps for the next call, cut so that no hook in `hooks` acts on a step inside the call (at least 1)."""
    for hook in hooks:
        action = next_action(hook, step)
        if action is None:
            continue
        if action.decided_before and action.step > step + 1:
            size = min(size, action.step - 1 - step)
        else:
            size = min(size, action.step - step)
    return max(size, 1)
