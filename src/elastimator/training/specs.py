"""`TrainSpec` and `EvalSpec`: what `train_and_evaluate` trains on and evaluates with."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import ConfigError
from elastimator.estimator.hooks import check_hooks
from elastimator.training.exporters import Exporter
from elastimator.training.policies import EvalPolicy, EveryNSeconds


def _positive_or_none(owner: str, name: str, value) -> None:
    if value is not None and not is_int(value, minimum=1):
        raise ConfigError(f"{owner}: {name} must be a positive int or None; got {value!r}.")


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """How to train: the input, the last global step, extra hooks and saving listeners."""

    input_fn: Callable
    """Training input_fn."""
    max_steps: int | None = None
    """Train until this global step (None: until the input ends)."""
    hooks: Sequence[tf.compat.v1.train.SessionRunHook] = ()
    """Extra hooks for every training process (or `StepHook`s, built from the training step's tensors)."""
    saving_listeners: Sequence[tf.compat.v1.train.CheckpointSaverListener] = ()
    """Listeners around each checkpoint save (chief only)."""

    def __post_init__(self):
        if not callable(self.input_fn):
            raise ConfigError(f"TrainSpec: input_fn must be callable; got {type(self.input_fn).__name__}.")
        _positive_or_none("TrainSpec", "max_steps", self.max_steps)
        hooks = check_hooks("TrainSpec.hooks", self.hooks, ConfigError, training=True)
        object.__setattr__(self, "hooks", tuple(hooks))
        listeners = tuple(self.saving_listeners or ())
        for listener in listeners:
            if not isinstance(listener, tf.compat.v1.train.CheckpointSaverListener):
                raise ConfigError(
                    f"TrainSpec.saving_listeners must be CheckpointSaverListener instances; got "
                    f"{type(listener).__name__}."
                )
        object.__setattr__(self, "saving_listeners", listeners)


@dataclasses.dataclass(frozen=True)
class EvalSpec:
    """How and when to evaluate, and which exporters run after each evaluation.

    `policy` decides when: by default at most once per `throttle_secs`; pass
    e.g. `EveryNSteps(1000)` to evaluate by steps, or `EveryNSteps(1000) | EveryNSeconds(600)`.
    """

    input_fn: Callable
    """Evaluation input_fn."""
    steps: int | None = 100
    """Batches per evaluation (None: until the input ends)."""
    name: str | None = None
    """Evaluation name; events go to eval_<name>/."""
    hooks: Sequence[tf.compat.v1.train.SessionRunHook] = ()
    """Extra evaluation hooks."""
    exporters: Any = None
    """An Exporter or a list of them, run after each evaluation."""
    start_delay_secs: int = 120
    """Distributed evaluator: wait this long before the first evaluation."""
    throttle_secs: int = 600
    """At least this many seconds between evaluations (the default policy)."""
    policy: EvalPolicy | None = None
    """When to evaluate; None means EveryNSeconds(throttle_secs)."""

    def __post_init__(self):
        if not callable(self.input_fn):
            raise ConfigError(f"EvalSpec: input_fn must be callable; got {type(self.input_fn).__name__}.")
        _positive_or_none("EvalSpec", "steps", self.steps)
        if self.name is not None and not isinstance(self.name, str):
            raise ConfigError(f"EvalSpec: name must be a string or None; got {self.name!r}.")
        for field in ("start_delay_secs", "throttle_secs"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"EvalSpec: {field} must be a number >= 0; got {value!r}.")
        object.__setattr__(self, "hooks", tuple(check_hooks("EvalSpec.hooks", self.hooks, ConfigError)))
        exporters = self.exporters
        if exporters is None:
            exporters = ()
        elif isinstance(exporters, Exporter):
            exporters = (exporters,)
        exporters = tuple(exporters)
        for exporter in exporters:
            if not isinstance(exporter, Exporter):
                raise ConfigError(f"EvalSpec: exporters must be Exporter instances; got {type(exporter).__name__}.")
        names = [e.name for e in exporters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(
                f"EvalSpec: exporter names must be unique (each exports to export/<name>/); {duplicates} "
                "appear more than once. Give each exporter its own name."
            )
        object.__setattr__(self, "exporters", exporters)
        if self.policy is None:
            object.__setattr__(self, "policy", EveryNSeconds(self.throttle_secs))
        elif not isinstance(self.policy, EvalPolicy):
            raise ConfigError(f"EvalSpec: policy must be an EvalPolicy; got {type(self.policy).__name__}.")
