"""elastimator: the TensorFlow Estimator programming model on current TensorFlow.

Change `tf.estimator` to `elastimator` and a model_fn program runs as before::

    import elastimator as est
    estimator = est.Estimator(model_fn, model_dir="/tmp/model")
    estimator.train(est.inputs.numpy_input_fn({"x": x}, y, shuffle=True), max_steps=1000)

`import elastimator` is cheap: each public name is imported from its module on first use, so the
command line answers `--help` and reads confs without loading TensorFlow.
"""

from __future__ import annotations

import importlib
import sys as _sys

from elastimator import tensorflow_import as _tensorflow_import
from elastimator._keras_routing import prefer_tf_keras as _prefer_tf_keras
from elastimator.errors import (
    CheckpointError,
    ClusterError,
    ConfError,
    ConfigError,
    ElastimatorError,
    ExportError,
    HeadError,
    InputFnError,
    ModelDirError,
    ModelFnError,
    ReaderError,
)

_prefer_tf_keras()
if not _tensorflow_import.for_the_command_line(getattr(_sys, "orig_argv", [])):
    # A missing or too old TensorFlow is one clear ImportError here, not a traceback at the first use.
    _tensorflow_import.check_installed()
_tensorflow_import.quiet_tensorflow_import()

__version__ = "0.1.0"

_PUBLIC_BY_MODULE = {
    "elastimator.data": ("Column", "ElasticReader", "FileReader"),
    "elastimator.estimator.estimator": ("Estimator",),
    "elastimator.estimator.contract.mode_keys": ("ModeKeys",),
    "elastimator.estimator.loops.predictor": ("Predictor",),
    "elastimator.estimator.contract.run_config": ("RunConfig", "TaskType"),
    "elastimator.estimator.contract.spec": ("EstimatorSpec",),
    "elastimator.estimator.contract.warm_start": ("VocabInfo", "WarmStartSettings"),
    "elastimator.premade": (
        "BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "BinaryClassHead", "DeepFMClassifier",
        "DNNClassifier", "DNNEstimator", "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator",
        "DNNLinearCombinedRegressor", "DNNRegressor", "Head", "LinearClassifier", "LinearEstimator",
        "LinearRegressor", "LogisticRegressionHead", "MultiClassHead", "MultiHead", "MultiLabelHead",
        "PoissonRegressionHead",
        "RegressionHead",
    ),
    "elastimator.train_eval.early_stopping": (
        "make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_decrease_hook",
        "stop_if_no_increase_hook",
    ),
    "elastimator.train_eval.exporters": ("BestExporter", "Exporter", "FinalExporter", "LatestExporter"),
    "elastimator.train_eval.metrics": ("ResetMetricsHook", "add_metrics"),
    "elastimator.train_eval.policies": ("AllOf", "AnyOf", "EvalPolicy", "EveryNSeconds", "EveryNSteps"),
    "elastimator.train_eval.specs": ("EvalSpec", "TrainSpec"),
    "elastimator.train_eval.train_and_evaluate": ("train_and_evaluate",),
}
_MODULE_OF = {name: module for module, names in _PUBLIC_BY_MODULE.items() for name in names}

_PUBLIC_SUBMODULES = ("embedding", "experimental", "export", "inputs", "premade", "tpu")
_OTHER_SUBMODULES = ("keras", "compat")
"""Also reachable as attributes; not in `__all__`: `keras` loads Keras 3, `compat` is opt-in."""

__all__ = sorted([
    "CheckpointError", "ClusterError", "ConfError", "ConfigError", "ElastimatorError", "ExportError", "HeadError",
    "InputFnError", "ModelDirError", "ModelFnError", "NanLossError", "ReaderError",
    *_MODULE_OF, *_PUBLIC_SUBMODULES,
])


def __getattr__(name: str):
    if name in _MODULE_OF or name in _PUBLIC_SUBMODULES or name in _OTHER_SUBMODULES or name == "NanLossError":
        from elastimator.tensorflow_import import require_supported  # pylint: disable=import-outside-toplevel

        require_supported()  # a missing or too old TensorFlow is one clear ImportError, not a deep traceback
    if name == "NanLossError":  # a TensorFlow exception type, made on first use (see elastimator.errors)
        value = getattr(importlib.import_module("elastimator.errors"), name)
    elif name in _MODULE_OF:
        value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    elif name in _PUBLIC_SUBMODULES or name in _OTHER_SUBMODULES:
        value = importlib.import_module(f"elastimator.{name}")
    else:
        raise AttributeError(f"module 'elastimator' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_OTHER_SUBMODULES))
