"""The engine: Estimator, EstimatorSpec, RunConfig and the verbs behind them.

This is the engine's face: what the packages above it (premade, keras, tpu, training, job, elastic, cli) may
use is named here, and they import it from here, never from the engine's modules. The engine imports nothing
from them. Names load on first use (as `elastimator`'s own do), so importing one does not build the rest.

* the API objects: `Estimator`, `EstimatorSpec`, `RunConfig`, `TaskType`, `ModeKeys`, `tf_variable`;
* calling user code: `fn_args`, `check_model_fn`, `call_model_fn`, `check_hooks`;
* a training step, as hooks see it: `TrainingStep`, `StepHook`, `StepInput`, `step_after_call`, `plan_gate`;
* checkpoints and exports: `CheckpointDir`, `ResumePoint`, `global_step_of`, `checkpoint_damage`, `make_saver`,
  `TRAIN_OP_COLLECTION`;
* the cluster a process belongs to: `LOCAL_JOB_TF_CONFIG`.
"""

from __future__ import annotations

import importlib

_FACE = {
    "Estimator": ("estimator", "Estimator"),
    "EstimatorSpec": ("spec", "EstimatorSpec"),
    "tf_variable": ("spec", "tf_variable"),
    "RunConfig": ("run_config", "RunConfig"),
    "TaskType": ("run_config", "TaskType"),
    "ModeKeys": ("mode_keys", "ModeKeys"),
    "fn_args": ("calls", "fn_args"),
    "check_model_fn": ("calls", "check_model_fn"),
    "call_model_fn": ("calls", "call_model_fn"),
    "check_hooks": ("hooks", "check_hooks"),
    "TrainingStep": ("training_step", "TrainingStep"),
    "StepHook": ("training_step", "StepHook"),
    "StepInput": ("training_step", "StepInput"),
    "step_after_call": ("multi_step", "step_after_call"),
    "plan_gate": ("write_gate", "plan_gate"),
    "CheckpointDir": ("checkpoints", "CheckpointDir"),
    "ResumePoint": ("checkpoints", "ResumePoint"),
    "global_step_of": ("checkpoints", "global_step_of"),
    "checkpoint_damage": ("checkpoints", "damage"),
    "make_saver": ("checkpoints", "make_saver"),
    "TRAIN_OP_COLLECTION": ("exporting", "TRAIN_OP_COLLECTION"),
    "LOCAL_JOB_TF_CONFIG": ("tf_config", "LOCAL_JOB_TF_CONFIG"),
}

__all__ = sorted(_FACE)


def __getattr__(name: str):
    if name not in _FACE:
        raise AttributeError(f"module 'elastimator.estimator' has no attribute {name!r}")
    module, attribute = _FACE[name]
    value = getattr(importlib.import_module(f"elastimator.estimator.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FACE))
