"""What elastimator serves of tf.estimator 2.15, as data: the public API and the private surface frameworks use.

One table, read two ways: `compat.api` builds the module objects `install()` puts in place from it, and
`elastimator check` (`migrate.check`) reads a source tree against it without importing TensorFlow. Targets are
strings (`"module:attribute"`), so reading the table loads nothing.

The private part is chosen from evidence: the modules, names and `Estimator` members that public code
built on tf.estimator imports or calls (TF-Ranking, AdaNet, EasyRec, TF-GAN, DeepCTR, DLRover, and the other
projects `docs/migration.md` ranks), each with tf.estimator 2.15's meaning. Names that no project used are left
out on purpose: importing one is an error that names this table.
"""

from __future__ import annotations

import dataclasses

HOOKS = ("CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook",
         "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook", "ProfilerHook", "SecondOrStepTimer",
         "SessionRunArgs", "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook",
         "StopAtStepHook", "SummarySaverHook")
"""The session-run hooks tf.estimator re-exported from tf.compat.v1.train."""

ENGINE = ("BestExporter", "Estimator", "EstimatorSpec", "EvalSpec", "Exporter", "FinalExporter", "LatestExporter",
          "ModeKeys", "RunConfig", "TrainSpec", "VocabInfo", "WarmStartSettings", "add_metrics",
          "train_and_evaluate")
"""Served by the `elastimator` package itself."""

CANNED = ("BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "BinaryClassHead", "DNNClassifier",
          "DNNEstimator", "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor",
          "DNNRegressor", "Head", "LinearClassifier", "LinearEstimator", "LinearRegressor", "MultiClassHead",
          "MultiHead", "MultiLabelHead", "RegressionHead", "PoissonRegressionHead", "LogisticRegressionHead",
          "classifier_parse_example_spec", "regressor_parse_example_spec")
"""Served by `elastimator.premade`."""

SUBMODULES = {
    "export": ("ClassificationOutput", "EvalOutput", "ExportOutput", "PredictOutput", "RegressionOutput",
               "ServingInputReceiver", "SupervisedInputReceiver", "TensorServingInputReceiver", "TrainOutput",
               "build_parsing_serving_input_receiver_fn", "build_raw_serving_input_receiver_fn",
               "build_raw_supervised_input_receiver_fn"),
    "experimental": ("InMemoryEvaluatorHook", "KMeans", "LinearSDCA", "RNNClassifier", "RNNEstimator",
                     "SavedModelEstimator", "build_raw_supervised_input_receiver_fn", "call_logit_fn",
                     "dnn_logit_fn_builder", "linear_logit_fn_builder", "make_early_stopping_hook",
                     "make_stop_at_checkpoint_step_hook", "stop_if_higher_hook", "stop_if_lower_hook",
                     "stop_if_no_decrease_hook", "stop_if_no_increase_hook"),
    "inputs": ("numpy_input_fn", "pandas_input_fn"),
    "tpu": ("InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec", "experimental"),
}
"""tf.estimator's namespaces below `tf.estimator` (`inputs` and `tpu` in the v1 API only), as 2.15 had them."""

V1_ONLY = ("inputs", "tpu")

PUBLIC = frozenset(HOOKS + ENGINE + CANNED + tuple(SUBMODULES))
"""Every name `tf.estimator` / `tf.compat.v1.estimator` had in 2.15."""


@dataclasses.dataclass(frozen=True)
class Served:
    """One private name elastimator serves.

    Attributes:
        target: `"module:attribute"` (`"module:"` for a module served whole).
        differs: What a caller sees that 2.15 did differently, or "".
    """

    target: str
    differs: str = ""


def _names(module: str, names) -> dict[str, Served]:
    return {name: Served(f"{module}:{name}") for name in names}


_ON_THE_HOST = "runs on the host: no TPU rewrite, no inference batching"

PRIVATE: dict[str, dict[str, Served]] = {
    "": {},
    "estimator": {
        **_names("elastimator", ("Estimator",)),
        "EstimatorV2": Served("elastimator:Estimator"),
        **_names("elastimator.compat.private", ("_load_global_step_from_checkpoint_dir",)),
        "maybe_overwrite_model_dir_and_session_config": Served(
            "elastimator.compat.private:maybe_overwrite_model_dir_and_session_config",
            "a missing session_config stays None (the Estimator's default for the task's role)"),
    },
    "estimator_lib": _names("elastimator", ENGINE) | _names("elastimator.premade", CANNED),
    "model_fn": _names("elastimator", ("EstimatorSpec", "ModeKeys")),
    "mode_keys": _names("elastimator", ("ModeKeys",)),
    "run_config": _names("elastimator", ("RunConfig", "TaskType")),
    "training": {
        **_names("elastimator", ("TrainSpec", "EvalSpec", "train_and_evaluate")),
        **_names("elastimator.train_eval.executor", ("_TrainingExecutor", "_ContinuousEvalListener",
                                                     "_EvalResult", "_assert_eval_spec", "_is_google_env")),
    },
    "exporter": {
        **_names("elastimator", ("Exporter", "FinalExporter", "LatestExporter", "BestExporter")),
        **_names("elastimator.train_eval.exporters", ("_SavedModelExporter",)),
    },
    "gc": _names("elastimator.compat.gc", ("Path", "_largest_export_versions", "_one_of_every_n_export_versions",
                                           "_mod_export_version", "_union", "_negation", "_get_paths")),
    "util": _names("elastimator.compat.private", ("parse_input_fn_result", "parse_iterator_result", "fn_args")),
    "estimator_export": _names("elastimator.compat.private", ("estimator_export",)),
    "early_stopping": _names("elastimator.experimental", (
        "make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook", "stop_if_no_decrease_hook",
        "stop_if_no_increase_hook")),
    "hooks": {},
    "hooks.hooks": _names("elastimator.experimental", ("InMemoryEvaluatorHook",
                                                       "make_stop_at_checkpoint_step_hook")),
    "export": _names("elastimator.export", SUBMODULES["export"]),
    "export.export": _names("elastimator.export", SUBMODULES["export"]),
    "export.export_output": _names("elastimator.export", SUBMODULES["export"]),
    "export.export_lib": _names("elastimator.export", SUBMODULES["export"]),
    "inputs": _names("elastimator.inputs", SUBMODULES["inputs"]),
    "inputs.numpy_io": _names("elastimator.inputs", ("numpy_input_fn",)),
    "inputs.pandas_io": _names("elastimator.inputs", ("pandas_input_fn",)),
    "keras": _names("elastimator.keras", ("model_to_estimator",)),
    "keras_lib": {"model_to_estimator": Served(
        "elastimator.compat.private:keras_lib_model_to_estimator",
        "export_outputs is not taken (the export serves the model's outputs as one PredictOutput)")},
    "canned": {},
    "canned.head": _names("elastimator.compat.legacy_head", ("_Head",)),
    "canned.optimizers": {**_names("elastimator.premade", ("get_optimizer_instance",)),
                          **_names("elastimator.optimizers", ("get_optimizer_instance_v2",))},
    "canned.prediction_keys": _names("elastimator.premade", ("PredictionKeys",)),
    "canned.metric_keys": _names("elastimator.premade", ("MetricKeys",)),
    "canned.linear": _names("elastimator.premade", ("LinearClassifier", "LinearRegressor", "LinearEstimator")),
    "canned.dnn": _names("elastimator.premade", ("DNNClassifier", "DNNRegressor", "DNNEstimator")),
    "canned.dnn_linear_combined": _names("elastimator.premade", (
        "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "DNNLinearCombinedEstimator")),
    "canned.baseline": _names("elastimator.premade", ("BaselineClassifier", "BaselineRegressor",
                                                      "BaselineEstimator")),
    "canned.saved_model_estimator": _names("elastimator.premade.saved_model_estimator", ("SavedModelEstimator",)),
    "canned.rnn": _names("elastimator.experimental", ("RNNClassifier", "RNNEstimator")),
    "tpu": {},
    "tpu.tpu_estimator": {
        **_names("elastimator.tpu", ("TPUEstimator", "TPUEstimatorSpec")),
        **_names("elastimator.tpu.estimator", ("ExportSavedModelApiVersion",)),
        "BatchConfig": Served("elastimator.compat.private:BatchConfig", _ON_THE_HOST),
        "model_fn_inference_on_tpu": Served("elastimator.compat.private:model_fn_inference_on_tpu", _ON_THE_HOST),
    },
    "tpu.tpu_config": _names("elastimator.tpu", ("InputPipelineConfig", "RunConfig", "TPUConfig")),
    "head": {},
    "head.base_head": _names("elastimator.premade", ("Head",)),
    "head.binary_class_head": _names("elastimator.premade", ("BinaryClassHead",)),
    "head.multi_class_head": _names("elastimator.premade", ("MultiClassHead",)),
    "head.multi_label_head": _names("elastimator.premade", ("MultiLabelHead",)),
    "head.multi_head": _names("elastimator.premade", ("MultiHead",)),
    "head.regression_head": _names("elastimator.premade", (
        "RegressionHead", "PoissonRegressionHead", "LogisticRegressionHead")),
}
"""Private module path (below `tensorflow_estimator.python.estimator` and `tensorflow.python.estimator`) ->
the names of it that elastimator serves."""

PRIVATE_ROOTS = ("tensorflow.python.estimator", "tensorflow_estimator.python.estimator")

_V1_HEAD = ("tf.estimator 1.x's head factories, which only AdaNet's own tests call; use the public heads "
            "(tf.estimator.BinaryClassHead, MultiClassHead, RegressionHead)")

PRIVATE_NOT_SERVED: dict[str, str] = {
    "canned.head._binary_logistic_head_with_sigmoid_cross_entropy_loss": _V1_HEAD,
    "canned.head._multi_class_head_with_softmax_cross_entropy_loss": _V1_HEAD,
    "canned.head._regression_head": _V1_HEAD,
    "canned.dnn._dnn_model_fn": "the DNN estimators' internal model_fn, which only AdaNet's own tests call; use "
                                "tf.estimator.DNNEstimator, or dnn_logit_fn_builder in a model_fn of yours",
    "training._DELAY_SECS_PER_WORKER": "tf.estimator's start-up delay per worker, which only AdaNet's own "
                                       "distributed test reads; elastimator's workers wait for the chief instead",
}
"""Private names public code used that elastimator leaves out on purpose, with why and what to use instead."""

REMOVED_TF_MODULES: dict[str, dict[str, Served]] = {
    "tensorflow.python.distribute.estimator_training": _names(
        "elastimator.compat.private", ("should_run_distribute_coordinator", "train_and_evaluate")),
}
"""TensorFlow's own modules that left with tf.estimator, with the names of each elastimator serves."""

ESTIMATOR_MEMBERS: frozenset[str] = frozenset({
    "_config", "_model_dir", "_params", "_model_fn", "_session_config", "_train_distribution",
    "_eval_distribution", "_device_fn", "_warm_start_settings", "_call_model_fn", "_call_input_fn",
    "_create_global_step", "_create_and_assert_global_step", "_get_features_from_input_fn",
    "_get_features_and_labels_from_input_fn", "_convert_train_steps_to_hooks", "_convert_eval_steps_to_hooks",
    "_export_all_saved_models", "_maybe_warm_start", "_assert_members_are_not_overridden",
})
"""tf.estimator 2.15's private Estimator members that elastimator's Estimator has, with 2.15's arguments and
results (`estimator/private_members.py`). The engine calls `_call_model_fn` for every graph, as 2.15 did."""

_OWN_LOOP = ("tf.estimator's own training loop, which elastimator replaces (estimator/loops/train_loop.py): "
             "pass hooks or saving listeners to train() instead")
_OWN_EVALUATION = ("tf.estimator's own evaluation internals (elastimator's: estimator/loops/evaluate_loop.py): "
                   "pass hooks to evaluate() instead")

ESTIMATOR_MEMBERS_NOT_SERVED: dict[str, str] = {
    **dict.fromkeys(("_train_model", "_train_model_default", "_train_model_distributed",
                     "_actual_train_model_distributed", "_train_with_estimator_spec",
                     "_train_with_estimator_spec_distributed"), _OWN_LOOP),
    **dict.fromkeys(("_evaluate_build_graph", "_call_model_fn_eval", "_call_model_fn_eval_distributed",
                     "_evaluate_run", "_actual_eval"), _OWN_EVALUATION),
    "_add_meta_graph_for_mode": "tf.estimator's export internals: call experimental_export_all_saved_models("
                                "export_dir_base, {mode: receiver_fn, ...}) instead",
    "_get_iterator_from_input_fn": "tf.estimator's distributed input internals: return a tf.data.Dataset from "
                                   "input_fn instead",
    **dict.fromkeys(("_validate_features_in_predict_input", "_extract_keys", "_extract_batch_length"),
                    "tf.estimator's predict internals: predict() does this itself"),
}
"""2.15's private Estimator members that elastimator does not have, with what to do instead."""

USED_BY: dict[str, tuple[str, ...]] = {}
"""Canonical name (as `elastimator check` prints it) -> the public projects whose code uses it: the evidence
for serving it, from `elastimator check --by-name` over the projects docs/migration.md names."""


def private_module(dotted: str) -> str | None:
    """The table's key for a private estimator module path (`tensorflow.python.estimator.canned.head` ->
    `canned.head`), or None when `dotted` is under neither root."""
    for root in PRIVATE_ROOTS:
        if dotted == root:
            return ""
        if dotted.startswith(root + "."):
            return dotted[len(root) + 1:]
    return None
