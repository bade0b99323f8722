"""The module objects `elastimator.compat.install()` puts where estimator code imports from.

Three shapes of import are served:

* the public API: `tf.estimator`, `tf.compat.v1.estimator` (which adds `inputs`),
  `import tensorflow_estimator as tfe; tfe.estimator`;
* the private paths third-party code reached into:
  `tensorflow.python.estimator.<module>` and
  `tensorflow_estimator.python.estimator.<module>` (the same table under both);
* nothing else: an unlisted private module fails with an ImportError that says so.

Each namespace is a plain module whose attributes are elastimator's own objects, so
`tf.estimator.Estimator is elastimator.Estimator`.
"""

from __future__ import annotations

import types

import tensorflow as tf

import elastimator
from elastimator import experimental, export, inputs, premade, tpu
from elastimator.compat.legacy_head import _Head
from elastimator.keras import model_to_estimator
from elastimator.premade.saved_model_estimator import SavedModelEstimator
from elastimator.premade.v1 import V1_CANNED

_HOOKS = ("CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook",
          "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook", "ProfilerHook", "SecondOrStepTimer",
          "SessionRunArgs", "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook",
          "StopAtStepHook", "SummarySaverHook")
"""The session-run hooks tf.estimator re-exported from tf.compat.v1.train."""

_ENGINE = ("BestExporter", "Estimator", "EstimatorSpec", "EvalSpec", "Exporter", "FinalExporter", "LatestExporter",
           "ModeKeys", "RunConfig", "TrainSpec", "VocabInfo", "WarmStartSettings", "add_metrics",
           "train_and_evaluate")

_CANNED = ("BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "BinaryClassHead", "DNNClassifier",
           "DNNEstimator", "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor",
           "DNNRegressor", "Head", "LinearClassifier", "LinearEstimator", "LinearRegressor", "MultiClassHead",
           "MultiHead", "MultiLabelHead", "RegressionHead", "PoissonRegressionHead", "LogisticRegressionHead")


def _module(name: str, doc: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__dict__.update(attributes)
    return module


def _estimator_api(name: str, *, v1: bool) -> types.ModuleType:
    attributes = {n: getattr(elastimator, n) for n in _ENGINE}
    attributes.update({n: getattr(premade, n) for n in _CANNED})
    attributes.update({n: getattr(tf.compat.v1.train, n) for n in _HOOKS})
    attributes.update(export=export, experimental=experimental,
                      classifier_parse_example_spec=premade.classifier_parse_example_spec,
                      regressor_parse_example_spec=premade.regressor_parse_example_spec)
    if v1:
        attributes["inputs"] = inputs
        attributes["tpu"] = _module(f"{name}.tpu", "tf.compat.v1.estimator.tpu, served by elastimator.",
                                    **{n: getattr(tpu, n) for n in tpu.__all__ if n != "experimental"},
                                    experimental=tpu.experimental)
        attributes.update(V1_CANNED)  # Losses summed over the batch, as tf.compat.v1.estimator's were.
    return _module(name, f"tf.estimator ({'v1' if v1 else 'v2'} API), served by elastimator.", **attributes)


def public_modules() -> dict[str, types.ModuleType]:
    """`tf.estimator` (v2) and `tf.compat.v1.estimator` (v1), keyed by where they are attached."""
    return {"v2": _estimator_api("tensorflow.estimator", v1=False),
            "v1": _estimator_api("tensorflow.compat.v1.estimator", v1=True)}


def _private_table() -> dict[str, dict]:
    """Private module path (under `.../python/estimator`) -> the names it held that we provide."""
    engine = {n: getattr(elastimator, n) for n in _ENGINE}
    return {
        "": {},
        "estimator": {"Estimator": elastimator.Estimator},
        "model_fn": {"EstimatorSpec": elastimator.EstimatorSpec},
        "mode_keys": {"ModeKeys": elastimator.ModeKeys},
        "run_config": {"RunConfig": elastimator.RunConfig, "TaskType": elastimator.TaskType},
        "training": {n: engine[n] for n in ("TrainSpec", "EvalSpec", "train_and_evaluate")},
        "exporter": {n: engine[n] for n in ("Exporter", "FinalExporter", "LatestExporter", "BestExporter")},
        "early_stopping": {n: getattr(experimental, n) for n in experimental.__all__ if "stop" in n},
        "hooks.hooks": {"InMemoryEvaluatorHook": experimental.InMemoryEvaluatorHook,
                        "make_stop_at_checkpoint_step_hook": experimental.make_stop_at_checkpoint_step_hook},
        "hooks": {},
        "export": {n: getattr(export, n) for n in export.__all__},
        "export.export": {n: getattr(export, n) for n in export.__all__},
        "export.export_output": {n: getattr(export, n) for n in export.__all__},
        "inputs": {n: getattr(inputs, n) for n in inputs.__all__},
        "inputs.numpy_io": {"numpy_input_fn": inputs.numpy_input_fn},
        "inputs.pandas_io": {"pandas_input_fn": inputs.pandas_input_fn},
        "keras": {"model_to_estimator": model_to_estimator},
        "canned": {},
        "canned.head": {"_Head": _Head},
        "canned.optimizers": {"get_optimizer_instance": premade.get_optimizer_instance},
        "canned.prediction_keys": {"PredictionKeys": premade.PredictionKeys},
        "canned.metric_keys": {"MetricKeys": premade.MetricKeys},
        "canned.linear": {n: getattr(premade, n) for n in ("LinearClassifier", "LinearRegressor", "LinearEstimator")},
        "canned.dnn": {n: getattr(premade, n) for n in ("DNNClassifier", "DNNRegressor", "DNNEstimator")},
        "canned.dnn_linear_combined": {n: getattr(premade, n) for n in (
            "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "DNNLinearCombinedEstimator")},
        "canned.baseline": {n: getattr(premade, n) for n in ("BaselineClassifier", "BaselineRegressor",
                                                             "BaselineEstimator")},
        "canned.saved_model_estimator": {"SavedModelEstimator": SavedModelEstimator},
        "canned.rnn": {n: getattr(experimental, n) for n in ("RNNClassifier", "RNNEstimator")},
        "tpu": {},
        "tpu.tpu_estimator": {n: getattr(tpu, n) for n in ("TPUEstimator", "TPUEstimatorSpec")},
        "tpu.tpu_config": {n: getattr(tpu, n) for n in ("InputPipelineConfig", "RunConfig", "TPUConfig")},
        "head": {},
        "head.binary_class_head": {"BinaryClassHead": premade.BinaryClassHead},
        "head.multi_class_head": {"MultiClassHead": premade.MultiClassHead},
        "head.multi_label_head": {"MultiLabelHead": premade.MultiLabelHead},
        "head.multi_head": {"MultiHead": premade.MultiHead},
        "head.regression_head": {n: getattr(premade, n) for n in (
            "RegressionHead", "PoissonRegressionHead", "LogisticRegressionHead")},
    }


PRIVATE_ROOTS = ("tensorflow.python.estimator", "tensorflow_estimator.python.estimator")


def private_modules() -> dict[str, types.ModuleType]:
    """Every private module path under both roots, as modules (packages get a `__path__`)."""
    table = _private_table()
    packages = {path.rpartition(".")[0] for path in table if "." in path} | {""}
    modules = {}
    for root in PRIVATE_ROOTS:
        for path, names in table.items():
            full = f"{root}.{path}" if path else root
            module = _module(full, f"{full}, served by elastimator.compat.", **names)
            if path in packages:
                module.__path__ = []  # A package: its submodules come from sys.modules.
            modules[full] = module
    for full, module in modules.items():  # Parents expose children as attributes, as real packages do.
        parent, _, child = full.rpartition(".")
        if parent in modules:
            setattr(modules[parent], child, module)
    return modules
