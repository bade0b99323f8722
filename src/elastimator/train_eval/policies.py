"""When to evaluate: small policy objects that combine.

A policy answers one question, from the last evaluation and the present:
"evaluate now?" It holds no state; the caller remembers the last evaluation.
"""

from __future__ import annotations

import abc
import dataclasses

from elastimator.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class EvalRecord:
    """When the last evaluation ran: its global step and wall-clock time (seconds)."""

    step: int
    time: float


class EvalPolicy(abc.ABC):
    """Decides whether to evaluate a checkpoint at `step`, at time `now`."""

    @abc.abstractmethod
    def should_evaluate(self, last: EvalRecord | None, step: int, now: float) -> bool:
        """True to evaluate now. `last` is None before the first evaluation."""

    def __or__(self, other: "EvalPolicy") -> "EvalPolicy":
        return AnyOf(self, other)


@dataclasses.dataclass(frozen=True)
class EveryNSeconds(EvalPolicy):
    """At most one evaluation per `secs` seconds (tf.estimator's `throttle_secs`)."""

    secs: float

    def __post_init__(self):
        if self.secs < 0:
            raise ConfigError(f"EveryNSeconds: secs must be >= 0; got {self.secs}.")

    def should_evaluate(self, last, step, now):
        return last is None or (step > last.step and now - last.time >= self.secs)


@dataclasses.dataclass(frozen=True)
class EveryNSteps(EvalPolicy):
    """Evaluate once `n` or more global steps have passed since the last evaluation."""

    n: int

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n <= 0:
            raise ConfigError(f"EveryNSteps: n must be a positive int; got {self.n!r}.")

    def should_evaluate(self, last, step, now):
        return last is None or step - last.step >= self.n


@dataclasses.dataclass(frozen=True, init=False)
class _Combined(EvalPolicy):
    """Several policies, combined by the subclass's rule."""

    policies: tuple

    def __init__(self, *policies: EvalPolicy):
        if not policies or not all(isinstance(p, EvalPolicy) for p in policies):
            raise ConfigError(f"{type(self).__name__} needs one or more EvalPolicy objects; got {policies!r}.")
        object.__setattr__(self, "policies", policies)


class AnyOf(_Combined):
    """Evaluate when any of the policies says so."""

    def should_evaluate(self, last, step, now):
        return any(p.should_evaluate(last, step, now) for p in self.policies)


class AllOf(_Combined):
    """Evaluate only when every policy says so (e.g. >= 1000 steps and >= 60 s)."""

    def should_evaluate(self, last, step, now):
        return all(p.should_evaluate(last, step, now) for p in self.policies)
