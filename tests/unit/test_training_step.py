"""Step outputs: an input declares per-batch tensors, hooks built from the TrainingStep get one row per step."""

import random

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.estimator.step.training_step import StepHook, StepInput

BATCHES = 10


def _tagged_input():
    """Batches of 2 records; each batch declares its first record number as a step output."""
    def input_fn():
        x = np.arange(BATCHES * 2, dtype=np.float32)
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, x % 2)).batch(2)
        return dataset.map(lambda f, l: StepInput(f, l, {"first": tf.cast(f["x"][0], tf.int64)}))
    return input_fn


def _model_fn(features, labels, mode):
    assert set(features) == {"x"}  # the step output never reaches model_fn
    weight = tf.compat.v1.get_variable("w", [1], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(features["x"] * weight - labels))
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.001).minimize(loss, tf.compat.v1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)


class _Rows(tf.compat.v1.train.SessionRunHook):
    def __init__(self, step):
        self._outputs, self._finished = step.outputs["first"], step.finished_outputs.get("first")
        self.rows, self._in_call = [], False

    def before_run(self, run_context):
        self._in_call = True
        return tf.compat.v1.train.SessionRunArgs(self._outputs)

    def after_run(self, run_context, run_values):
        self._in_call = False
        self.rows.extend(run_values.results.tolist())

    def end(self, session):
        if self._in_call and self._finished is not None:  # a call the input's end cut short
            self.rows.extend(session.run(self._finished).tolist())


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_a_step_hook_sees_the_step_output_of_every_batch_trained(tmp_path, steps_per_execution):
    built = []

    def build(step):
        built.append(_Rows(step))
        return built[-1]

    estimator = est.Estimator(_model_fn, model_dir=str(tmp_path), config=est.RunConfig(
        steps_per_execution=steps_per_execution, log_step_count_steps=None, save_summary_steps=None))
    estimator.train(_tagged_input(), hooks=[StepHook(build)])
    assert built[0].rows == [2 * b for b in range(BATCHES)]  # 10 batches: with 3 per call, the last call cut short
    assert estimator.get_variable_value("global_step") == BATCHES


def test_a_step_hook_is_refused_where_no_training_step_exists(tmp_path):
    estimator = est.Estimator(_model_fn, model_dir=str(tmp_path))
    estimator.train(_tagged_input(), steps=1)
    with pytest.raises(TypeError, match="hooks must be tf.compat.v1.train.SessionRunHook instances; got StepHook"):
        estimator.evaluate(_tagged_input(), hooks=[StepHook(_Rows)])


def test_a_seeded_build_gives_pythons_and_numpys_generators_back(tmp_path):
    random.seed(123)
    np.random.seed(123)
    expected = (random.random(), np.random.rand())
    random.seed(123)
    np.random.seed(123)
    estimator = est.Estimator(_model_fn, model_dir=str(tmp_path), config=est.RunConfig(tf_random_seed=7))
    estimator.train(_tagged_input(), steps=2)
    assert (random.random(), np.random.rand()) == expected  # the program's own draws do not depend on training
