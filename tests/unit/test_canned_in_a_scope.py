"""A canned estimator's model_fn called inside variable scopes of a framework's own (AdaNet's
AutoEnsembleEstimator calls each candidate's `estimator.model_fn` in a template) trains its model's own variables,
found under the scopes the model opened wherever they are, and no others, as tf.estimator 2.15's did.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import elastimator as est
from elastimator.experimental import LinearSDCA
from elastimator.premade import DNNEstimator, LinearEstimator, LinearRegressor, RegressionHead

X = np.linspace(-1, 1, 32, dtype="float32").reshape(-1, 1)
COLUMNS = [tf.feature_column.numeric_column("x")]


def _input_fn():
    features = {"x": X, "id": np.array([f"e{i}" for i in range(len(X))])}
    return tf.data.Dataset.from_tensor_slices((features, 3 * X)).repeat().batch(8)


def _in_a_template(candidate):
    """A model_fn that calls `candidate.model_fn` under scopes of its own, beside a variable of its own."""
    def model_fn(features, labels, mode, config):
        own = tf.compat.v1.get_variable("framework_bias", [], initializer=tf.compat.v1.ones_initializer())
        with tf.compat.v1.variable_scope("framework"):
            call = tf.compat.v1.make_template("model_fn", candidate.model_fn)
            spec = call(features=features, labels=labels, mode=mode, config=config)
        return spec._replace(loss=spec.loss + 0.0 * own)
    return model_fn


def _trained(tmp_path, candidate, steps=20) -> dict:
    estimator = est.Estimator(_in_a_template(candidate), model_dir=str(tmp_path / "outer"))
    estimator.train(_input_fn, steps=steps)
    return {name: estimator.get_variable_value(name) for name in estimator.get_variable_names()}


def test_a_dnn_and_a_linear_estimator_train_their_variables_under_the_framework_scopes(tmp_path):
    head = RegressionHead()
    linear = _trained(tmp_path / "linear", LinearEstimator(head, COLUMNS, optimizer="SGD"))
    weight = linear["framework/model_fn/linear/linear_model/x/weights"]
    assert weight[0, 0] > 1.0  # from zero towards y = 3x
    assert linear["framework_bias"] == 1.0  # not the model's: not trained
    assert linear["global_step"] == 20
    dnn = _trained(tmp_path / "dnn", DNNEstimator(head, [4], COLUMNS, optimizer="SGD"))
    assert np.all(dnn["framework/model_fn/dnn/logits/bias"] != 0.0)  # from zero
    assert dnn["framework_bias"] == 1.0 and dnn["global_step"] == 20


def test_linear_sdca_finds_its_model_under_the_framework_scopes(tmp_path):
    variables = _trained(tmp_path, LinearRegressor(COLUMNS, optimizer=LinearSDCA("id")), steps=40)
    assert 2.5 < variables["framework/model_fn/linear/linear_model/x/weights"][0, 0] < 3.0
