"""RunConfig(steps_per_execution=None), the default: several steps per session call wherever nothing observable
changes, calls sized by pace."""

import logging

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.errors import ConfigError
from elastimator.estimator.saving import checkpoints
from elastimator.estimator.step import steps_per_call
from elastimator.estimator.step.steps_per_call import Pace, allows_several_steps, why_one_step
from elastimator.estimator.step.training_step import StepHook


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_pace_starts_at_one_step_and_sizes_each_call_by_the_previous_calls_pace():
    clock = _Clock()
    pace = Pace(most_steps=10, call_secs=0.1, clock=clock)
    assert pace.next_size() == 1
    pace.started()
    clock.now += 0.02  # a 20 ms step
    pace.finished(1)
    assert pace.next_size() == 5
    pace.started()
    clock.now += 0.005  # 1 ms a step: capped at the most
    pace.finished(5)
    assert pace.next_size() == 10
    pace.started()
    clock.now += 30.0  # slow steps run one per call
    pace.finished(10)
    assert pace.next_size() == 1


class _PerCall(tf.compat.v1.train.SessionRunHook):
    def after_run(self, run_context, run_values):
        pass


class _OnlyBegins(tf.compat.v1.train.SessionRunHook):
    def begin(self):
        pass


class _Declared(_PerCall):
    several_steps_per_call = True


def test_which_hooks_allow_several_steps_per_call():
    allowed = [tf.compat.v1.train.StopAtStepHook(last_step=5), tf.compat.v1.train.NanTensorHook(tf.constant(1.0)),
               _OnlyBegins(), _Declared(), StepHook(lambda step: None)]
    refused = [tf.compat.v1.train.LoggingTensorHook(["loss"], every_n_iter=1), _PerCall(),
               tf.compat.v1.train.FeedFnHook(dict), StepHook(lambda step: None, several_steps_per_call=False)]
    assert [allows_several_steps(h) for h in allowed] == [True] * len(allowed)
    assert [allows_several_steps(h) for h in refused] == [False] * len(refused)


def test_why_one_step_names_the_reason():
    fine = lambda: None  # noqa: E731

    def v1_loop():
        raise ConfigError("the step uses TF1 control flow")

    assert why_one_step(hooks=[_OnlyBegins()], check_step=fine, steps_to_train=None) is None
    assert "_PerCall" in why_one_step(hooks=[_PerCall()], check_step=fine, steps_to_train=None)
    assert "20 steps" in why_one_step(hooks=[], check_step=fine, steps_to_train=20)
    assert "TF1 control flow" in why_one_step(hooks=[], check_step=v1_loop, steps_to_train=1000)
    assert "pass max_steps" in why_one_step(hooks=[], check_step=fine, steps_to_train=None, in_cluster=True)
    assert steps_per_call.steps_to_train(None, 300, restored_step=280) == 20


def _input_fn():
    x = np.arange(512, dtype=np.float32)
    return tf.data.Dataset.from_tensor_slices(({"x": x}, (x % 3).astype(np.float32))).batch(4).repeat()


def _model_fn(features, labels, mode):
    weight = tf.compat.v1.get_variable("w", [1, 1], initializer=tf.compat.v1.ones_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(features["x"][:, None] / 512.0, weight) - labels[:, None]))
    train_op = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)


class _Calls(tf.compat.v1.train.SessionRunHook):
    """Counts session calls; marked as fine with several steps per call, so it does not change the sizing."""

    several_steps_per_call = True

    def __init__(self):
        self.calls = 0

    def after_run(self, run_context, run_values):
        self.calls += 1


def _train(tmp_path, name, hooks, **config):
    estimator = est.Estimator(_model_fn, model_dir=str(tmp_path / name),
                              config=est.RunConfig(tf_random_seed=1, save_checkpoints_steps=120, **config))
    estimator.train(_input_fn, max_steps=240, hooks=hooks)
    return estimator


def test_by_default_a_fast_step_runs_several_per_call_and_trains_what_one_per_call_trains(tmp_path, caplog):
    calls = _Calls()
    with caplog.at_level(logging.INFO, logger="elastimator"):
        auto = _train(tmp_path, "auto", [calls])
    single = _train(tmp_path, "single", [], steps_per_execution=1)
    assert "up to 20 steps per session call" in caplog.text
    assert calls.calls < 240  # the steps, fewer calls
    assert auto.get_variable_value("global_step") == 240
    assert [checkpoints.step_of_path(p) for p in checkpoints.all_checkpoints(auto.model_dir)] == [0, 120, 240]
    np.testing.assert_array_equal(auto.get_variable_value("w"), single.get_variable_value("w"))


def test_a_hook_that_counts_calls_keeps_one_step_per_call(tmp_path, caplog):
    calls = _PerCallCounter()
    with caplog.at_level(logging.INFO, logger="elastimator"):
        _train(tmp_path, "per_call", [calls])
    assert calls.calls == 240
    assert "one step per session call: hook _PerCallCounter runs per session call" in caplog.text


class _PerCallCounter(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self.calls = 0

    def after_run(self, run_context, run_values):
        self.calls += 1


@pytest.mark.parametrize("value", [0, 2.5, "auto"])
def test_steps_per_execution_must_be_a_positive_int_or_none(value):
    with pytest.raises(ConfigError, match="or None to size calls automatically"):
        est.RunConfig(steps_per_execution=value)
