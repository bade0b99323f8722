"""Warm-starting a new model from another model's checkpoint."""

import numpy as np
import pytest

import elastimator as est
from elastimator import CheckpointError
from tests.helpers import eval_input, linear_model_fn, train_input


def test_warm_start_copies_the_chosen_variables(tmp_path, iris):
    x, y = iris
    base = est.Estimator(linear_model_fn, model_dir=str(tmp_path / "base"), params={"n_classes": 3})
    base.train(train_input(x, y), steps=100)

    # A zero learning rate leaves the warm-started weights exactly as initialized.
    frozen = {"n_classes": 3, "learning_rate": 0.0}
    warm = est.Estimator(linear_model_fn, model_dir=str(tmp_path / "warm"), params=frozen,
                         warm_start_from=base.model_dir)
    warm.train(train_input(x, y), steps=1)
    np.testing.assert_array_equal(warm.get_variable_value("logits/kernel"), base.get_variable_value("logits/kernel"))
    assert warm.get_variable_value("global_step") == 1  # the global step is not warm-started
    assert warm.evaluate(eval_input(x, y))["accuracy"] == base.evaluate(eval_input(x, y))["accuracy"]

    only_bias = est.Estimator(linear_model_fn, model_dir=str(tmp_path / "bias"), params=frozen,
                              warm_start_from=est.WarmStartSettings(ckpt_to_initialize_from=base.latest_checkpoint(),
                                                                    vars_to_warm_start="logits/bias"))
    only_bias.train(train_input(x, y), steps=1)
    np.testing.assert_array_equal(only_bias.get_variable_value("logits/bias"), base.get_variable_value("logits/bias"))
    assert not np.allclose(only_bias.get_variable_value("logits/kernel"), base.get_variable_value("logits/kernel"))


def test_warm_start_from_a_missing_checkpoint(tmp_path, iris):
    estimator = est.Estimator(linear_model_fn, model_dir=str(tmp_path / "m"), params={"n_classes": 3},
                              warm_start_from=str(tmp_path / "nowhere" / "model.ckpt-1"))
    with pytest.raises(CheckpointError, match="warm_start_from checkpoint .* does not exist"):
        estimator.train(train_input(*iris), steps=1)
