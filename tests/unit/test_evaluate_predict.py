"""Estimator.evaluate, Estimator.predict and the warm Estimator.predictor."""

import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import CheckpointError, ModelFnError
from tests.helpers import eval_input, linear_model_fn, read_events, train_input


@pytest.fixture
def trained(make_estimator, iris):
    # Seeded: unseeded, one initialization in twenty or so ended 100 steps below 0.85 accuracy.
    estimator = make_estimator(save_checkpoints_steps=50, tf_random_seed=7)
    estimator.train(train_input(*iris), steps=100)
    return estimator


def test_evaluate_returns_metrics_and_writes_them_to_eval_events(trained, iris):
    x, y = iris
    metrics = trained.evaluate(eval_input(x, y))
    assert set(metrics) == {"accuracy", "loss", "global_step"}
    assert metrics["global_step"] == 100 and metrics["accuracy"] > 0.85
    events = read_events(trained.eval_dir())
    assert events["accuracy"] == [(100, pytest.approx(metrics["accuracy"]))]
    assert events["loss"] == [(100, pytest.approx(metrics["loss"]))]
    assert trained.eval_dir() == os.path.join(trained.model_dir, "eval")


def test_evaluation_logs_tensorflows_line_as_2_15_printed_it_or_else_its_own_in_six_digits(trained, iris, caplog):
    """At INFO verbosity, 2.15's lines through TensorFlow's logger and not elastimator's (which would print the
    results twice under logging.basicConfig); else elastimator's own line (the command line's)."""
    import logging  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel

    tf_logger = tf.get_logger()  # TensorFlow's line, caught at its logger (another test may stop it propagating)
    tf_records = []
    catcher = logging.Handler()
    catcher.emit = tf_records.append
    level = tf_logger.level
    tf_logger.addHandler(catcher)
    try:
        with caplog.at_level(logging.INFO, logger="elastimator"):
            tf_logger.setLevel(logging.INFO)
            metrics = trained.evaluate(eval_input(*iris))
            tf_logger.setLevel(logging.WARNING)
            trained.evaluate(eval_input(*iris))
    finally:
        tf_logger.removeHandler(catcher)
        tf_logger.setLevel(level)
    theirs = [r.getMessage() for r in tf_records if r.levelno == logging.INFO]
    saved = next(m for m in theirs if m.startswith("Saving dict for global step 100"))
    assert f"loss = {metrics['loss']!s}" in saved  # numpy's float32 digits (str, as 2.15's %s), e.g. 0.086811386
    assert theirs.index(saved) > next(i for i, m in enumerate(theirs) if m.startswith("Finished evaluation at"))
    assert f"Saving 'checkpoint_path' summary for global step 100: {trained.latest_checkpoint()}" in theirs
    ours = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Evaluation at global step 100")]
    assert len(ours) == 1  # the second evaluation's, at WARNING verbosity
    assert f"loss = {float(metrics['loss']):.6g}" in ours[0] and "global_step =" not in ours[0]
    assert all(len(re.sub(r"[^0-9]", "", value.split("e")[0]).lstrip("0")) <= 6
               for value in re.findall(r"= ([0-9.e-]+)", ours[0]))


def test_evaluate_does_not_advance_the_global_step(trained, iris):
    trained.evaluate(eval_input(*iris))
    assert trained.get_variable_value("global_step") == 100


def test_named_evaluation_steps_and_older_checkpoint(trained, iris):
    x, y = iris
    metrics = trained.evaluate(eval_input(x, y, batch_size=10), steps=3, name="holdout",
                               checkpoint_path=os.path.join(trained.model_dir, "model.ckpt-50"))
    assert metrics["global_step"] == 50
    assert os.path.isdir(os.path.join(trained.model_dir, "eval_holdout"))
    # Three batches of ten: accuracy is a multiple of 1/30.
    assert round(metrics["accuracy"] * 30, 4) == round(metrics["accuracy"] * 30)


def test_evaluate_loss_is_the_mean_over_batches(trained, iris):
    x, y = iris
    whole = trained.evaluate(eval_input(x, y, batch_size=150))["loss"]
    batched = trained.evaluate(eval_input(x, y, batch_size=30))["loss"]
    assert batched == pytest.approx(whole, rel=1e-5)


class _EvalStepReader(tf.compat.v1.train.SessionRunHook):
    """Reads the eval step as hooks written for 2.15 (tf_slim's among them) find it: the graph's EVAL_STEP."""

    def begin(self):
        (self._eval_step,) = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.EVAL_STEP)

    def end(self, session):
        self.batches = session.run(self._eval_step)


def test_the_eval_step_in_its_collection_counts_the_batches_run(trained, iris):
    """2.15 read 3 here with steps=3, and 9 for the 8 batches of a whole pass: its increment ran beside the batch's
    updates, so the call that found the input ended counted too. Here it follows them: the batches run."""
    reader = _EvalStepReader()
    trained.evaluate(eval_input(*iris, batch_size=20), hooks=[reader])
    assert reader.batches == 8  # 150 examples in batches of 20
    reader = _EvalStepReader()
    trained.evaluate(eval_input(*iris, batch_size=20), steps=3, hooks=[reader])
    assert reader.batches == 3


def test_missing_checkpoint_path_is_a_clear_error(trained, iris):
    with pytest.raises(CheckpointError, match=r"model.ckpt-999' does not exist.*Checkpoints in .*model.ckpt-100"):
        trained.evaluate(eval_input(*iris), checkpoint_path=os.path.join(trained.model_dir, "model.ckpt-999"))
    with pytest.raises(CheckpointError, match="does not exist"):
        next(trained.predict(eval_input(iris[0]), checkpoint_path="/nonexistent/model.ckpt-1"))


class _Counter(tf.compat.v1.train.SessionRunHook):
    runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


def test_evaluation_and_prediction_hooks_run(make_estimator, iris):
    x, y = iris
    from_spec = {"eval": _Counter(), "predict": _Counter()}

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        return spec._replace(evaluation_hooks=[from_spec["eval"]], prediction_hooks=[from_spec["predict"]])

    estimator = make_estimator(model_fn=model_fn)
    estimator.train(train_input(x, y), steps=5)
    user = _Counter()
    estimator.evaluate(eval_input(x, y, batch_size=50), hooks=[user])
    list(estimator.predict(eval_input(x, batch_size=50)))
    assert (user.runs, from_spec["eval"].runs, from_spec["predict"].runs) == (3, 3, 3)


def test_predict_yields_examples_and_selected_keys(trained, iris):
    x, y = iris
    predictions = list(trained.predict(eval_input(x)))
    assert len(predictions) == 150 and set(predictions[0]) == {"classes", "probabilities"}
    assert predictions[0]["probabilities"].shape == (3,)
    accuracy = np.mean([p["classes"] for p in predictions] == y)
    assert accuracy > 0.85
    only = list(trained.predict(eval_input(x), predict_keys=["classes"]))
    assert set(only[0]) == {"classes"}
    assert [p["classes"] for p in only] == [p["classes"] for p in predictions]


def test_predict_whole_batches(trained, iris):
    batches = list(trained.predict(eval_input(iris[0], batch_size=64), yield_single_examples=False))
    assert [b["probabilities"].shape for b in batches] == [(64, 3), (64, 3), (22, 3)]


def test_unknown_predict_key_names_the_available_ones(trained, iris):
    with pytest.raises(ModelFnError, match=r"predict_keys \['logit'\] are not among .*\['classes', 'probabilities'\]"):
        next(trained.predict(eval_input(iris[0]), predict_keys="logit"))


def test_predict_of_a_single_tensor(make_estimator, iris):
    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        if mode == "infer":
            return spec._replace(predictions=spec.predictions["classes"], export_outputs=None)
        return spec

    estimator = make_estimator(model_fn=model_fn)
    estimator.train(train_input(*iris), steps=5)
    values = list(estimator.predict(eval_input(iris[0][:5])))
    assert len(values) == 5 and all(np.ndim(v) == 0 for v in values)


def _receiver():
    """Serving inputs for the warm Predictor: one placeholder, fed by name."""
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
    return est.export.ServingInputReceiver({"x": x}, {"x": x})


def test_a_warm_predictor_matches_predict_and_reloads_newer_checkpoints(trained, iris):
    x, y = iris
    with trained.predictor(_receiver) as predict:
        assert predict.input_names == ["x"] and predict.checkpoint.endswith("model.ckpt-100")
        first = predict({"x": x[:10]})
        again = predict({"x": x[10:30]})  # another batch size, the same session
        expected = list(trained.predict(eval_input(x[:30]), yield_single_examples=False))[0]
        np.testing.assert_allclose(np.concatenate([first["probabilities"], again["probabilities"]]),
                                   expected["probabilities"][:30], rtol=1e-6)
        assert not predict.reload()  # nothing newer yet
        trained.train(train_input(x, y), steps=50)
        assert predict.reload() and predict.checkpoint.endswith("model.ckpt-150")
        newer = predict({"x": x[:10]})["probabilities"]
        assert not np.allclose(newer, first["probabilities"])


def test_predict_keys_and_bad_inputs(trained, iris):
    with trained.predictor(_receiver, predict_keys="classes") as predict:
        assert {k: v.shape for k, v in predict({"x": iris[0][:5]}).items()} == {"classes": (5,)}
        with pytest.raises(est.InputFnError, match=r"inputs must be exactly \['x'\]; missing \['x'\], unknown \['y'\]"):
            predict({"y": iris[0][:5]})
    with pytest.raises(est.InputFnError, match="must return a ServingInputReceiver; got dict"):
        trained.predictor(lambda: {"x": 1})
