"""TPUEstimator off a TPU: its configs, its spec, and the one error for use_tpu=True."""

import pytest
import tensorflow as tf

from elastimator import ConfigError, ModelFnError, tpu
from tests.helpers import eval_input, linear_model_fn, train_input


def test_use_tpu_true_is_one_error_saying_what_to_pass(tmp_path):
    with pytest.raises(ConfigError, match=r"use_tpu=True\) runs on a TPU.*Pass use_tpu=False"):
        tpu.TPUEstimator(linear_model_fn, str(tmp_path))


def test_the_tpu_run_config_keeps_its_tpu_config_through_replace(tmp_path):
    config = tpu.RunConfig(tpu.TPUConfig(iterations_per_loop=50, num_shards=8), model_dir=str(tmp_path),
                           save_checkpoints_steps=10)
    replaced = config.replace(keep_checkpoint_max=2)
    assert replaced.tpu_config.iterations_per_loop == 50 and replaced.keep_checkpoint_max == 2
    assert replaced.save_checkpoints_steps == 10 and replaced.master == ""
    assert tpu.TPUConfig(iterations_per_loop="30s").iterations_per_loop == "30s"
    with pytest.raises(ConfigError, match="iterations_per_loop must be a positive int or a duration"):
        tpu.TPUConfig(iterations_per_loop=0)


def test_an_estimator_spec_from_a_tpu_model_fn_works_too(tmp_path, iris):
    def model_fn(features, labels, mode, params):
        assert params["use_tpu"] is False and params["n_classes"] == 3
        return linear_model_fn(features, labels, mode, params)

    estimator = tpu.TPUEstimator(model_fn, str(tmp_path), params={"n_classes": 3}, use_tpu=False,
                                 train_batch_size=16)
    estimator.train(lambda params: train_input(*iris, batch_size=params["batch_size"])(), steps=5)
    assert estimator.get_variable_value("global_step") == 5
    assert "accuracy" in estimator.evaluate(eval_input(*iris), steps=1)


def test_tpu_estimator_spec_checks_its_pairs():
    with tf.Graph().as_default():
        with pytest.raises(ModelFnError, match=r"eval_metrics must be a \(function, tensors\) pair"):
            tpu.TPUEstimatorSpec("eval", loss=tf.constant(1.0), eval_metrics=({"acc": 1},))
    with pytest.raises(ConfigError, match=r"params \['batch_size'\] are TPUEstimator's own keys"):
        tpu.TPUEstimator(linear_model_fn, params={"batch_size": 3}, use_tpu=False)
