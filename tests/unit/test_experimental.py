"""tf.estimator.experimental's helpers: logit functions, the in-memory evaluator, stopping at a checkpoint step."""

import os

import pytest
import tensorflow as tf

import elastimator as est
from elastimator.experimental import (
    InMemoryEvaluatorHook,
    call_logit_fn,
    dnn_logit_fn_builder,
    linear_logit_fn_builder,
    make_stop_at_checkpoint_step_hook,
)
from elastimator.train_eval.stop_at_checkpoint import StopAtCheckpointStepHook
from tests.helpers import eval_input, read_events, train_input

COLUMNS = [tf.feature_column.numeric_column("x", shape=[4])]


def _wide_and_deep_model_fn(features, labels, mode, params):
    """A model_fn composed from the canned models' logit functions, as 2.15's docs suggest."""
    with tf.compat.v1.variable_scope("dnn"):
        deep = call_logit_fn(dnn_logit_fn_builder(3, [8], COLUMNS, tf.nn.relu, None, None, False), features, mode,
                             params, None)
    with tf.compat.v1.variable_scope("linear"):
        wide = call_logit_fn(linear_logit_fn_builder(3, COLUMNS), features, mode, params, None)
    return est.MultiClassHead(3).create_estimator_spec(features, mode, deep + wide, labels,
                                                       optimizer=tf.compat.v1.train.AdamOptimizer(0.05))


def test_logit_fns_compose_a_model_with_the_canned_variable_names(make_estimator, iris):
    estimator = make_estimator(model_fn=_wide_and_deep_model_fn)
    estimator.train(train_input(*iris), steps=150)
    names = estimator.get_variable_names()
    assert {"dnn/hiddenlayer_0/kernel", "dnn/logits/kernel", "linear/linear_model/x/weights"} <= set(names)
    assert estimator.evaluate(eval_input(*iris))["accuracy"] > 0.8


def test_call_logit_fn_passes_what_it_takes_and_checks_what_it_returns():
    with tf.Graph().as_default():
        logits = call_logit_fn(lambda features, params: features["x"] * params["scale"], {"x": tf.ones([2, 1])},
                               est.ModeKeys.TRAIN, {"scale": 3.0}, None)
        assert logits.shape == (2, 1)
        with pytest.raises(ValueError, match="must return a tensor or a dict of tensors; got list"):
            call_logit_fn(lambda features: [1.0], {}, est.ModeKeys.TRAIN, {}, None)
    with pytest.raises(ValueError, match="units must be an int; got 2.5"):
        dnn_logit_fn_builder(2.5, [4], COLUMNS, tf.nn.relu, None, None, False)


def test_in_memory_evaluator_evaluates_between_checkpoints(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=1000)
    x, y = iris
    hook = InMemoryEvaluatorHook(estimator, eval_input(x, y), steps=2, every_n_iter=10)
    estimator.train(train_input(x, y), steps=30, hooks=[hook])
    # As 2.15's: at the session's start, every 10 calls, and at the end (step 30 twice), no checkpoint between.
    assert [step for step, _ in read_events(estimator.eval_dir())["loss"]] == [0, 10, 20, 30, 30]
    checkpoints = sorted(f for f in os.listdir(estimator.model_dir) if f.endswith(".index"))
    assert checkpoints == ["model.ckpt-0.index", "model.ckpt-30.index"]
    assert hook.results["global_step"] == 30 and 0 <= hook.results["accuracy"] <= 1


def test_stop_at_checkpoint_step_hook_stops_a_worker_once_the_chiefs_checkpoint_is_there(make_estimator, iris):
    estimator = make_estimator()
    assert isinstance(make_stop_at_checkpoint_step_hook(estimator, 5), tf.compat.v1.train.StopAtStepHook)
    estimator.train(train_input(*iris), steps=5)

    class Context:
        stopped = False

        def request_stop(self):
            self.stopped = True

    now = [0.0]
    waiting = StopAtCheckpointStepHook(estimator.model_dir, 6, wait_after_file_check_secs=30, clock=lambda: now[0])
    context = Context()
    waiting.before_run(context)
    assert not context.stopped  # the newest checkpoint is step 5
    done = StopAtCheckpointStepHook(estimator.model_dir, 5, wait_after_file_check_secs=30, clock=lambda: now[0])
    done.before_run(context)
    assert context.stopped


def test_the_experimental_names_resolve_under_tf_estimator():
    import elastimator.compat  # pylint: disable=import-outside-toplevel

    elastimator.compat.install()
    try:
        assert tf.estimator.experimental.InMemoryEvaluatorHook is InMemoryEvaluatorHook
        assert tf.compat.v1.estimator.experimental.linear_logit_fn_builder is linear_logit_fn_builder
    finally:
        elastimator.compat.uninstall()
