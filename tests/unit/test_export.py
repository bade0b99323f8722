"""SavedModel export: layout, signatures, and serving with plain TensorFlow."""

import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import ExportError
from elastimator.export import ClassificationOutput, PredictOutput, RegressionOutput
from tests.helpers import eval_input, linear_model_fn, train_input


@pytest.fixture
def trained(make_estimator, iris):
    estimator = make_estimator()
    estimator.train(train_input(*iris), steps=60)
    return estimator


def test_raw_receiver_export_serves_the_same_predictions(trained, iris, tmp_path):
    x, _ = iris
    path = trained.export_saved_model(str(tmp_path / "export"), est.export.build_raw_serving_input_receiver_fn(
        {"x": x[:1]}))
    assert isinstance(path, bytes)
    export_dir = path.decode()
    assert os.path.dirname(export_dir) == str(tmp_path / "export") and os.path.basename(export_dir).isdigit()
    assert sorted(os.listdir(export_dir)) == ["assets", "saved_model.pb", "variables"] or \
        sorted(os.listdir(export_dir)) == ["saved_model.pb", "variables"]
    served = tf.saved_model.load(export_dir).signatures["serving_default"](x=tf.constant(x))
    expected = np.stack([p["probabilities"] for p in trained.predict(eval_input(x))])
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, rtol=1e-5)


def test_each_export_gets_its_own_timestamp_and_no_temp_dir_remains(trained, iris, tmp_path):
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": iris[0][:1]})
    first = trained.export_saved_model(str(tmp_path), receiver)
    second = trained.export_saved_model(str(tmp_path), receiver, as_text=True)
    assert first != second
    assert os.path.exists(os.path.join(second.decode(), "saved_model.pbtxt"))
    assert not [d for d in os.listdir(tmp_path) if d.startswith("temp-")]


def _multi_output_model_fn(features, labels, mode, params):
    spec = linear_model_fn(features, labels, mode, params)
    if mode != est.ModeKeys.PREDICT:
        return spec
    probabilities = spec.predictions["probabilities"]
    classes = tf.strings.as_string(tf.tile(tf.constant([[0, 1, 2]], tf.int64), [tf.shape(probabilities)[0], 1]))
    return spec._replace(export_outputs={
        "serving_default": ClassificationOutput(scores=probabilities, classes=classes),
        "regress": RegressionOutput(tf.reduce_max(probabilities, axis=1)),
        "predict": PredictOutput(spec.predictions),
    })


def test_parsing_receiver_gives_classify_and_regress_signatures(make_estimator, iris, tmp_path):
    x, y = iris
    estimator = make_estimator(model_fn=_multi_output_model_fn)
    estimator.train(train_input(x, y), steps=60)
    feature_spec = {"x": tf.io.FixedLenFeature([4], tf.float32)}
    path = estimator.export_saved_model(
        str(tmp_path), est.export.build_parsing_serving_input_receiver_fn(feature_spec)).decode()
    loaded = tf.saved_model.load(path)
    assert set(loaded.signatures) == {"serving_default", "regress", "predict"}
    examples = [tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in x[:3]]
    out = loaded.signatures["serving_default"](inputs=tf.constant(examples))
    assert out["scores"].shape == (3, 3) and out["classes"].numpy()[0].tolist() == [b"0", b"1", b"2"]
    regressed = loaded.signatures["regress"](inputs=tf.constant(examples))["outputs"].numpy()
    np.testing.assert_allclose(regressed, out["scores"].numpy().max(axis=1), rtol=1e-6)
    meta = tf.compat.v1.saved_model.loader.load  # the TF1 view of the signatures
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        graph_def = meta(session, ["serve"], path)
        assert graph_def.signature_def["serving_default"].method_name == "tensorflow/serving/classify"


def test_receiver_alternatives_and_assets_extra(trained, iris, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\n")

    def receiver_fn():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        return est.export.ServingInputReceiver({"x": x}, {"x": x}, {"renamed": {"features": x}})

    path = trained.export_saved_model(str(tmp_path / "e"), receiver_fn, assets_extra={"vocab/v.txt": str(vocab)})
    export_dir = path.decode()
    assert open(os.path.join(export_dir, "assets.extra", "vocab", "v.txt")).read() == "a\nb\n"
    assert set(tf.saved_model.load(export_dir).signatures) == {"serving_default", "serving_default:renamed"}


def test_tensor_receiver_passes_a_raw_tensor(tmp_path, iris):
    x, y = iris

    def model_fn(features, labels, mode):
        inputs = features if isinstance(features, tf.Tensor) else features["x"]
        return linear_model_fn({"x": inputs}, labels, mode, {})

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path / "m"))
    estimator.train(train_input(x, y), steps=5)

    def receiver_fn():
        raw = tf.compat.v1.placeholder(tf.float32, [None, 4])
        return est.export.TensorServingInputReceiver(raw, {"raw": raw})

    path = estimator.export_saved_model(str(tmp_path / "e"), receiver_fn).decode()
    out = tf.saved_model.load(path).signatures["serving_default"](raw=tf.constant(x[:2]))
    assert out["classes"].shape == (2,)


def test_eval_mode_export(trained, iris, tmp_path):
    x, y = iris
    receiver = est.export.build_raw_supervised_input_receiver_fn({"x": x[:1]}, y[:1])
    path = trained.export_saved_model(str(tmp_path), receiver, experimental_mode=est.ModeKeys.EVAL).decode()
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["eval"], path)
        signature = meta.signature_def["eval"]
        assert {"loss", "metrics/accuracy/value", "metrics/accuracy/update_op"} <= set(signature.outputs)


def test_export_errors(trained, iris, tmp_path):
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": iris[0][:1]})
    untrained = est.Estimator(linear_model_fn, model_dir=str(tmp_path / "untrained"))
    with pytest.raises(ExportError, match="No checkpoint in model_dir .* Train the estimator first"):
        untrained.export_saved_model(str(tmp_path / "none"), receiver)
    assert not (tmp_path / "none").exists()
    with pytest.raises(ExportError, match="must return a ServingInputReceiver .* got dict"):
        trained.export_saved_model(str(tmp_path / "bad"), lambda: {"x": 1})
    assert not [d for d in os.listdir(tmp_path / "bad") if d.startswith("temp-")]  # a failed export leaves nothing
    with pytest.raises(ExportError, match="serving_input_receiver_fn must be callable"):
        trained.export_saved_model(str(tmp_path), None)
    with pytest.raises(ExportError, match=r"assets_extra\['v'\] = '/missing' does not exist"):
        trained.export_saved_model(str(tmp_path / "x"), receiver, assets_extra={"v": "/missing"})
    assert not [d for d in os.listdir(tmp_path / "x") if d.startswith("temp-")]


def test_all_modes_export_into_one_saved_model_with_one_copy_of_the_variables(trained, iris, tmp_path):
    x, y = iris
    supervised = est.export.build_raw_supervised_input_receiver_fn({"x": x[:1]}, y[:1])
    path = trained.experimental_export_all_saved_models(str(tmp_path), {
        est.ModeKeys.TRAIN: supervised, est.ModeKeys.EVAL: supervised,
        est.ModeKeys.PREDICT: est.export.build_raw_serving_input_receiver_fn({"x": x[:1]})}).decode()
    for tags, signature in ((["train"], "train"), (["eval"], "eval"), (["serve"], "serving_default")):
        with tf.Graph().as_default(), tf.compat.v1.Session() as session:
            meta = tf.compat.v1.saved_model.loader.load(session, tags, path)
            assert signature in meta.signature_def, tags
            weights = [v for v in tf.compat.v1.global_variables() if "global_step" not in v.name]
            assert weights and all(np.isfinite(session.run(v)).all() for v in weights)
    served = tf.saved_model.load(path, tags=["serve"]).signatures["serving_default"](x=tf.constant(x))
    expected = np.stack([p["probabilities"] for p in trained.predict(eval_input(x))])
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, rtol=1e-5)
