"""elastimator: the TensorFlow Estimator programming model on current TensorFlow.

Change `tf.estimator` to `elastimator` and a model_fn program runs as before::

    import elastimator as est
    estimator = est.Estimator(model_fn, model_dir="/tmp/model")
    estimator.train(est.inputs.numpy_input_fn({"x": x}, y, shuffle=True), max_steps=1000)
"""

from elastimator._keras_routing import prefer_tf_keras as _prefer_tf_keras

_prefer_tf_keras()

# pylint: disable=wrong-import-position
from elastimator import experimental, export, inputs, premade
from elastimator.data import Column, ElasticReader, FileReader
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
    NanLossError,
    ReaderError,
)
from elastimator.estimator.estimator import Estimator
from elastimator.estimator.mode_keys import ModeKeys
from elastimator.estimator.predictor import Predictor
from elastimator.estimator.run_config import RunConfig, TaskType
from elastimator.estimator.spec import EstimatorSpec
from elastimator.estimator.warm_start import VocabInfo, WarmStartSettings
from elastimator.premade import (
    BaselineClassifier,
    BaselineEstimator,
    BaselineRegressor,
    BinaryClassHead,
    DeepFMClassifier,
    DNNClassifier,
    DNNEstimator,
    DNNLinearCombinedClassifier,
    DNNLinearCombinedEstimator,
    DNNLinearCombinedRegressor,
    DNNRegressor,
    Head,
    LinearClassifier,
    LinearEstimator,
    LinearRegressor,
    MultiClassHead,
    MultiLabelHead,
    RegressionHead,
)
from elastimator.training.early_stopping import (
    make_early_stopping_hook,
    stop_if_higher_hook,
    stop_if_lower_hook,
    stop_if_no_decrease_hook,
    stop_if_no_increase_hook,
)
from elastimator.training.exporters import BestExporter, Exporter, FinalExporter, LatestExporter
from elastimator.training.metrics import ResetMetricsHook, add_metrics
from elastimator.training.policies import AllOf, AnyOf, EvalPolicy, EveryNSeconds, EveryNSteps
from elastimator.training.specs import EvalSpec, TrainSpec
from elastimator.training.train_and_evaluate import train_and_evaluate

__version__ = "0.1.0"

_LAZY_SUBMODULES = ("keras", "compat")
"""Imported on first attribute access: `keras` loads Keras 3, `compat` is opt-in."""


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib  # pylint: disable=import-outside-toplevel

        return importlib.import_module(f"elastimator.{name}")
    raise AttributeError(f"module 'elastimator' has no attribute {name!r}")


__all__ = [
    "AllOf",
    "AnyOf",
    "BaselineClassifier",
    "BaselineEstimator",
    "BaselineRegressor",
    "BestExporter",
    "BinaryClassHead",
    "CheckpointError",
    "ClusterError",
    "Column",
    "ConfError",
    "ConfigError",
    "DNNClassifier",
    "DNNEstimator",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedEstimator",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "DeepFMClassifier",
    "ElasticReader",
    "ElastimatorError",
    "Estimator",
    "EstimatorSpec",
    "EvalPolicy",
    "EvalSpec",
    "EveryNSeconds",
    "EveryNSteps",
    "ExportError",
    "Exporter",
    "FileReader",
    "FinalExporter",
    "Head",
    "HeadError",
    "InputFnError",
    "LatestExporter",
    "LinearClassifier",
    "LinearEstimator",
    "LinearRegressor",
    "ModeKeys",
    "ModelDirError",
    "ModelFnError",
    "MultiClassHead",
    "MultiLabelHead",
    "NanLossError",
    "Predictor",
    "ReaderError",
    "RegressionHead",
    "ResetMetricsHook",
    "RunConfig",
    "TaskType",
    "TrainSpec",
    "VocabInfo",
    "WarmStartSettings",
    "add_metrics",
    "experimental",
    "export",
    "inputs",
    "make_early_stopping_hook",
    "premade",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
    "train_and_evaluate",
]
