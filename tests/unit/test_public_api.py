"""The public API is curated: every listed name imports and nothing private leaks."""

import inspect

import elastimator
import elastimator.embedding
import elastimator.experimental
import elastimator.export
import elastimator.inputs
import elastimator.keras
import elastimator.premade
import elastimator.tpu


TENSORFLOWS_OWN = {"VocabInfo"}  # tf.estimator.VocabInfo was tf.compat.v1.train.VocabInfo itself; so is ours


def test_every_public_name_imports_and_is_elastimators_own():
    for module in (elastimator, elastimator.embedding, elastimator.experimental, elastimator.export,
                   elastimator.inputs, elastimator.premade, elastimator.tpu, elastimator.keras):
        for name in module.__all__:
            value = getattr(module, name)
            if name in TENSORFLOWS_OWN:
                continue
            home = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
            assert home is not None and home.startswith("elastimator."), f"{module.__name__}.{name} is {value!r}"


def test_public_names_are_exactly_the_curated_list():
    assert sorted(elastimator.__all__) == sorted([
        "BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "BinaryClassHead", "DNNClassifier",
        "DNNEstimator", "DNNLinearCombinedClassifier", "DNNLinearCombinedEstimator", "DNNLinearCombinedRegressor",
        "DNNRegressor", "DeepFMClassifier", "embedding", "Head", "HeadError", "LinearClassifier", "LinearEstimator",
        "LinearRegressor", "LogisticRegressionHead", "MultiClassHead", "MultiHead", "MultiLabelHead",
        "PoissonRegressionHead",
        "RegressionHead", "premade",
        "AllOf", "AnyOf", "BestExporter", "CheckpointError", "ClusterError", "Column", "ConfError", "ConfigError",
        "ElasticReader", "ElastimatorError", "Estimator", "EstimatorSpec", "EvalPolicy", "EvalSpec",
        "EveryNSeconds", "EveryNSteps", "ExportError", "Exporter", "FileReader", "FinalExporter", "InputFnError",
        "LatestExporter", "ModeKeys", "ModelDirError", "ModelFnError", "NanLossError", "Predictor", "ReaderError",
        "ResetMetricsHook", "RunConfig", "TaskType", "TrainSpec", "VocabInfo", "WarmStartSettings", "add_metrics",
        "experimental", "export", "inputs", "make_early_stopping_hook", "stop_if_higher_hook", "stop_if_lower_hook",
        "stop_if_no_decrease_hook", "stop_if_no_increase_hook", "tpu", "train_and_evaluate",
    ])


def test_errors_share_one_base_and_keep_tf_estimator_builtin_types():
    for name in ("CheckpointError", "ConfError", "ConfigError", "ExportError", "HeadError", "InputFnError",
                 "ModelDirError", "ModelFnError", "ReaderError"):
        cls = getattr(elastimator, name)
        assert issubclass(cls, elastimator.ElastimatorError) and issubclass(cls, ValueError)
    for name in ("NanLossError", "ClusterError"):
        cls = getattr(elastimator, name)
        assert issubclass(cls, elastimator.ElastimatorError) and issubclass(cls, RuntimeError)


def test_mode_keys_have_tf_estimator_values():
    assert (elastimator.ModeKeys.TRAIN, elastimator.ModeKeys.EVAL, elastimator.ModeKeys.PREDICT) == (
        "train", "eval", "infer")


def test_the_engine_has_one_face_and_looks_at_nothing_above_it():
    """Outside `estimator/`, code imports the engine from `elastimator.estimator` (its face), never from its
    modules; the engine imports none of the packages built on it."""
    import pathlib  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel

    import elastimator.estimator  # pylint: disable=import-outside-toplevel

    source = pathlib.Path(elastimator.__file__).parent
    above = ("premade", "keras", "tpu", "train_eval", "job", "elastic", "cluster", "data", "compat", "cli")
    reaching_in, looking_up = [], []
    for path in source.rglob("*.py"):
        text = path.read_text()
        inside = path.relative_to(source).parts[0] == "estimator"
        if not inside and re.search(r"^\s*from elastimator\.estimator\.\w+ import", text, re.M):
            reaching_in.append(str(path.relative_to(source)))
        if inside and re.search(rf"^\s*(from|import) elastimator\.({'|'.join(above)})\b", text, re.M):
            looking_up.append(str(path.relative_to(source)))
    assert not reaching_in and not looking_up
    assert {"Estimator", "CheckpointDir", "StepHook"} <= set(dir(elastimator.estimator))
