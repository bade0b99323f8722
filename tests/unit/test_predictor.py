"""Estimator.predictor: one graph and one restore, many calls."""

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from tests.helpers import eval_input, train_input


def _receiver():
    x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
    return est.export.ServingInputReceiver({"x": x}, {"x": x})


@pytest.fixture
def trained(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=50)
    estimator.train(train_input(*iris), steps=50)
    return estimator


def test_a_warm_predictor_matches_predict_and_reloads_newer_checkpoints(trained, iris):
    x, y = iris
    with trained.predictor(_receiver) as predict:
        assert predict.input_names == ["x"] and predict.checkpoint.endswith("model.ckpt-50")
        first = predict({"x": x[:10]})
        again = predict({"x": x[10:30]})  # another batch size, the same session
        expected = list(trained.predict(eval_input(x[:30]), yield_single_examples=False))[0]
        np.testing.assert_allclose(np.concatenate([first["probabilities"], again["probabilities"]]),
                                   expected["probabilities"][:30], rtol=1e-6)
        assert not predict.reload()  # nothing newer yet
        trained.train(train_input(x, y), steps=50)
        assert predict.reload() and predict.checkpoint.endswith("model.ckpt-100")
        newer = predict({"x": x[:10]})["probabilities"]
        assert not np.allclose(newer, first["probabilities"])


def test_predict_keys_and_bad_inputs(trained, iris):
    with trained.predictor(_receiver, predict_keys="classes") as predict:
        assert {k: v.shape for k, v in predict({"x": iris[0][:5]}).items()} == {"classes": (5,)}
        with pytest.raises(est.InputFnError, match=r"inputs must be exactly \['x'\]; missing \['x'\], unknown \['y'\]"):
            predict({"y": iris[0][:5]})
    with pytest.raises(est.InputFnError, match="must return a ServingInputReceiver; got dict"):
        trained.predictor(lambda: {"x": 1})
