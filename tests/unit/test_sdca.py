"""LinearSDCA: what it refuses, and that its state survives a restart.

(Its training is compared with 2.15's in tests/compat_programs/test_programs.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from elastimator import InputFnError
from elastimator.experimental import LinearSDCA
from elastimator.premade import LinearClassifier, LinearRegressor

X = np.linspace(-1, 1, 32, dtype="float32").reshape(-1, 1)
COLUMNS = [tf.feature_column.numeric_column("x")]


def _input_fn(with_ids=True, labels=(X > 0).astype("int64")):
    def fn():
        features = {"x": X}
        if with_ids:
            features["id"] = np.array([f"e{i}" for i in range(len(X))])
        return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)
    return fn


def test_regularization_must_keep_the_problem_strongly_convex():
    with pytest.raises(ValueError, match="symmetric_l2_regularization must be > 0"):
        LinearSDCA("id", symmetric_l2_regularization=0.0)
    with pytest.raises(ValueError, match="symmetric_l1_regularization must be >= 0"):
        LinearSDCA("id", symmetric_l1_regularization=-1.0)


def test_a_batch_without_example_ids_says_which_feature_is_missing(tmp_path):
    classifier = LinearClassifier(COLUMNS, model_dir=str(tmp_path), optimizer=LinearSDCA("id"))
    with pytest.raises(InputFnError, match="example id column 'id'"):
        classifier.train(_input_fn(with_ids=False), steps=1)


def test_string_labels_are_refused_with_what_to_do(tmp_path):
    labels = np.where(X > 0, "yes", "no")
    classifier = LinearClassifier(COLUMNS, model_dir=str(tmp_path), label_vocabulary=["no", "yes"],
                                  optimizer=LinearSDCA("id"))
    with pytest.raises(ValueError, match="Map them to 0 / 1 in input_fn"):
        classifier.train(_input_fn(labels=labels), steps=1)


def test_training_resumes_from_the_checkpoint_with_the_example_states(tmp_path):
    regressor = LinearRegressor(COLUMNS, model_dir=str(tmp_path), optimizer=LinearSDCA("id"))
    regressor.train(_input_fn(labels=3 * X), steps=8)
    assert "sdca_example_state-keys" in regressor.get_variable_names()
    states = regressor.get_variable_value("sdca_example_state-values")
    assert states.shape == (32, 4)  # every example visited once, its dual state kept
    regressor.train(_input_fn(labels=3 * X), steps=40)
    assert regressor.get_variable_value("global_step") == 48
    later = float(regressor.get_variable_value("linear/linear_model/x/weights")[0, 0])
    assert 2.5 < later < 3.0  # near y = 3x, held below it by the L2 term (the visiting order varies by run)
    assert np.count_nonzero(regressor.get_variable_value("sdca_example_state-values")[:, 0]) == 32  # duals
