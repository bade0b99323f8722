"""How input_fn and model_fn are called, and the errors for what they return."""

import functools

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import InputFnError, ModelFnError
from tests.helpers import linear_model_fn


def _dataset(with_labels=True):
    x = np.ones([8, 4], np.float32)
    y = np.zeros([8], np.int32)
    data = ({"x": x}, y) if with_labels else {"x": x}
    return tf.data.Dataset.from_tensor_slices(data).batch(4)


def test_model_fn_may_take_any_subset_of_its_arguments(tmp_path):
    seen = {}

    def model_fn(features, labels, mode, config):
        seen.update(mode=mode, config=config)
        return linear_model_fn(features, labels, mode, {})

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path))
    estimator.train(lambda: _dataset(), steps=2)
    assert seen["mode"] == "train" and seen["config"] is estimator.config


def test_params_are_copied_per_call(tmp_path):
    def model_fn(features, labels, mode, params):
        params["mutated"] = True
        return linear_model_fn(features, labels, mode, params)

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path), params={"n_classes": 2})
    estimator.train(lambda: _dataset(), steps=1)
    assert estimator.params == {"n_classes": 2}


def test_input_fn_forms(tmp_path):
    estimator = est.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"n_classes": 2})
    estimator.train(lambda: _dataset(), steps=1)  # Dataset of (features, labels)
    estimator.train(lambda: ({"x": tf.ones([4, 4])}, tf.zeros([4], tf.int32)), steps=1)  # a tuple
    estimator.train(functools.partial(lambda mode, params, config: _dataset()), steps=1)  # takes mode/params/config
    predictions = list(estimator.predict(lambda: _dataset(with_labels=False)))  # features-only dataset
    assert len(predictions) == 8 and estimator.get_variable_value("global_step") == 3


def test_input_fn_three_tuple_is_a_clear_error(tmp_path):
    estimator = est.Estimator(linear_model_fn, model_dir=str(tmp_path))
    with pytest.raises(InputFnError, match="returned a 3-tuple; expected \\(features, labels\\)"):
        estimator.train(lambda: ({"x": tf.ones([2, 4])}, tf.zeros([2]), tf.zeros([2])), steps=1)
    with pytest.raises(InputFnError, match="returned None"):
        estimator.train(lambda: None, steps=1)
    assert not (tmp_path / "checkpoint").exists()


def test_model_fn_returning_the_wrong_type(tmp_path):
    estimator = est.Estimator(lambda features, labels, mode: {"loss": 1}, model_dir=str(tmp_path))
    with pytest.raises(ModelFnError, match="must return an EstimatorSpec; got dict"):
        estimator.train(lambda: _dataset(), steps=1)


def test_model_fn_signature_errors(tmp_path):
    with pytest.raises(ModelFnError, match="must take a `features` argument"):
        est.Estimator(lambda x, y: None, model_dir=str(tmp_path))
    with pytest.raises(ModelFnError, match="takes no `params` argument"):
        est.Estimator(lambda features, labels, mode: None, model_dir=str(tmp_path), params={"a": 1})
    estimator = est.Estimator(lambda features, mode: None, model_dir=str(tmp_path))
    with pytest.raises(ModelFnError, match="takes no `labels` argument, but input_fn returned labels"):
        estimator.train(lambda: _dataset(), steps=1)


def test_model_fn_returning_a_spec_for_another_mode(tmp_path):
    def model_fn(features, labels, mode):
        return est.EstimatorSpec(est.ModeKeys.EVAL, loss=tf.reduce_sum(features["x"]))

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ModelFnError, match="called with mode='train' but returned .* mode='eval'"):
        estimator.train(lambda: _dataset(), steps=1)
