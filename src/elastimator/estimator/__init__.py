"""The engine: Estimator, EstimatorSpec, RunConfig and the verbs behind them.

This is the engine's face: what the packages above it (premade, keras, tpu, training, job, elastic, cli) may
use is named here, and they import it from here, never from the engine's modules. The engine imports nothing
from them. Names load on first use (as `elastimator`'s own do), so importing one does not build the rest.

* the API objects: `Estimator`, `EstimatorSpec`, `RunConfig`, `TaskType`, `ModeKeys`, `tf_variable`,
  `is_collective` (whether a strategy spans processes), `with_logical_devices` (a session config that sees
  the process's logical devices);
* calling user code: `fn_args`, `check_model_fn`, `call_model_fn`, `check_hooks`, `dataset_element`;
* a training step, as hooks see it: `TrainingStep`, `StepHook`, `StepInput`, `step_after_call`, `plan_gate`;
* checkpoints and exports: `CheckpointDir`, `ResumePoint`, `global_step_of`, `checkpoint_damage`, `make_saver`,
  `TRAIN_OP_COLLECTION`;
* the cluster a process belongs to: `LOCAL_JOB_TF_CONFIG`;
* 2.15's lines through TensorFlow's logger that a verb above the engine prints: `log_train_and_evaluate_start`.
"""

from __future__ import annotations

import importlib

_FACE = {
    "Estimator": ("estimator", "Estimator"),
    "EstimatorSpec": ("contract.spec", "EstimatorSpec"),
    "tf_variable": ("contract.spec", "tf_variable"),
    "RunConfig": ("contract.run_config", "RunConfig"),
    "TaskType": ("contract.run_config", "TaskType"),
    "is_collective": ("contract.run_config", "is_collective"),
    "with_logical_devices": ("contract.run_config", "with_logical_devices"),
    "ModeKeys": ("contract.mode_keys", "ModeKeys"),
    "fn_args": ("graph.calls", "fn_args"),
    "check_model_fn": ("graph.calls", "check_model_fn"),
    "call_model_fn": ("graph.calls", "call_model_fn"),
    "dataset_element": ("graph.calls", "dataset_element"),
    "check_hooks": ("loops.hooks", "check_hooks"),
    "TrainingStep": ("step.training_step", "TrainingStep"),
    "StepHook": ("step.training_step", "StepHook"),
    "StepInput": ("step.training_step", "StepInput"),
    "step_after_call": ("step.multi_step", "step_after_call"),
    "plan_gate": ("step.write_gate", "plan_gate"),
    "CheckpointDir": ("saving.checkpoints", "CheckpointDir"),
    "ResumePoint": ("saving.checkpoints", "ResumePoint"),
    "global_step_of": ("saving.checkpoints", "global_step_of"),
    "checkpoint_damage": ("saving.checkpoints", "damage"),
    "make_saver": ("saving.checkpoints", "make_saver"),
    "TRAIN_OP_COLLECTION": ("saving.exporting", "TRAIN_OP_COLLECTION"),
    "LOCAL_JOB_TF_CONFIG": ("contract.tf_config", "LOCAL_JOB_TF_CONFIG"),
    "log_train_and_evaluate_start": ("log_lines", "train_and_evaluate_locally"),
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
