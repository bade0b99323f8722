"""`TrainSpec` and `EvalSpec`: what `train_and_evaluate` trains on and evaluates with."""

from __future__ import annotations

import tensorflow as tf

from elastimator._records import record_type
from elastimator._validate import is_int
from elastimator.errors import ConfigError
from elastimator.estimator import check_hooks
from elastimator.train_eval.exporters import Exporter
from elastimator.train_eval.policies import EvalPolicy, EveryNSeconds


def _positive_or_none(owner: str, name: str, value) -> None:
    if value is not None and not is_int(value, minimum=1):
        raise ConfigError(f"{owner}: {name} must be a positive int or None; got {value!r}.")


class TrainSpec(record_type("TrainSpec", ("input_fn", "max_steps", "hooks", "saving_listeners"))):
    """How to train: the input, the last global step, extra hooks and saving listeners.

    Args:
        input_fn: the training input_fn.
        max_steps: train until this global step (None: until the input ends).
        hooks: extra hooks for every training process (or `StepHook`s, built from the training step's tensors).
        saving_listeners: listeners around each checkpoint save (chief only).
    """

    __slots__ = ()

    def __new__(cls, input_fn, max_steps=None, hooks=None, saving_listeners=None):
        if not callable(input_fn):
            raise ConfigError(f"TrainSpec: input_fn must be callable; got {type(input_fn).__name__}.")
        _positive_or_none("TrainSpec", "max_steps", max_steps)
        hooks = tuple(check_hooks("TrainSpec.hooks", hooks, ConfigError, training=True))
        listeners = tuple(saving_listeners or ())
        for listener in listeners:
            if not isinstance(listener, tf.compat.v1.train.CheckpointSaverListener):
                raise ConfigError(
                    f"TrainSpec.saving_listeners must be CheckpointSaverListener instances; got "
                    f"{type(listener).__name__}."
                )
        return super().__new__(cls, input_fn, max_steps, hooks, listeners)


_EVAL_FIELDS = ("input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs", "throttle_secs")


class EvalSpec(record_type("EvalSpec", _EVAL_FIELDS + ("policy",))):
    """How and when to evaluate, and which exporters run after each evaluation.

    `policy` (elastimator's, keyword-only) decides when: by default at most once per
    `throttle_secs`; pass e.g. `EveryNSteps(1000)` to evaluate by steps, or
    `EveryNSteps(1000) | EveryNSeconds(600)`.

    Args:
        input_fn: the evaluation input_fn.
        steps: batches per evaluation (None: until the input ends).
        name: the evaluation's name; its events go to eval_<name>/.
        hooks: extra evaluation hooks.
        exporters: an Exporter or a list of them, run after each evaluation.
        start_delay_secs: a distributed evaluator waits this long before the first evaluation.
        throttle_secs: at least this many seconds between evaluations (the default policy).
        policy: when to evaluate; None means EveryNSeconds(throttle_secs).
    """

    __slots__ = ()

    def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None, start_delay_secs=120,
                throttle_secs=600, *, policy=None):
        if not callable(input_fn):
            raise ConfigError(f"EvalSpec: input_fn must be callable; got {type(input_fn).__name__}.")
        _positive_or_none("EvalSpec", "steps", steps)
        if name is not None and not isinstance(name, str):
            raise ConfigError(f"EvalSpec: name must be a string or None; got {name!r}.")
        for field, value in (("start_delay_secs", start_delay_secs), ("throttle_secs", throttle_secs)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"EvalSpec: {field} must be a number >= 0; got {value!r}.")
        hooks = tuple(check_hooks("EvalSpec.hooks", hooks, ConfigError))
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
        if policy is None:
            policy = EveryNSeconds(throttle_secs)
        elif not isinstance(policy, EvalPolicy):
            raise ConfigError(f"EvalSpec: policy must be an EvalPolicy; got {type(policy).__name__}.")
        return super().__new__(cls, input_fn, steps, name, hooks, exporters, start_delay_secs, throttle_secs,
                               policy)
