"""elastimator: the TensorFlow Estimator programming model on current TensorFlow.

Change `tf.estimator` to `elastimator` and a model_fn program runs as before::

    import elastimator as est
    estimator = est.Estimator(model_fn, model_dir="/tmp/model")
    estimator.train(est.inputs.numpy_input_fn({"x": x}, y, shuffle=True), max_steps=1000)
"""

from elastimator._keras_routing import prefer_tf_keras as _prefer_tf_keras

_prefer_tf_keras()

# pylint: disable=wrong-import-position
from elastimator import export, inputs
from elastimator.errors import (
    CheckpointError,
    ConfigError,
    ElastimatorError,
    ExportError,
    InputFnError,
    ModelDirError,
    ModelFnError,
    NanLossError,
)
from elastimator.estimator.estimator import Estimator
from elastimator.estimator.mode_keys import ModeKeys
from elastimator.estimator.run_config import RunConfig, TaskType
from elastimator.estimator.spec import EstimatorSpec
from elastimator.estimator.warm_start import VocabInfo, WarmStartSettings

__version__ = "0.1.0"

__all__ = [
    "CheckpointError",
    "ConfigError",
    "ElastimatorError",
    "Estimator",
    "EstimatorSpec",
    "ExportError",
    "InputFnError",
    "ModeKeys",
    "ModelDirError",
    "ModelFnError",
    "NanLossError",
    "RunConfig",
    "TaskType",
    "VocabInfo",
    "WarmStartSettings",
    "export",
    "inputs",
]
