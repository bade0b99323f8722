"""The private names TF Lattice's canned estimators use, with tf.estimator 2.15's meaning: a head given a tf-keras
optimizer whose `iterations` the caller made the global step, `canned.optimizers.get_optimizer_instance_v2` and
`estimator.maybe_overwrite_model_dir_and_session_config`."""

import os

import pytest
import tensorflow as tf

import elastimator as est
from elastimator._keras_routing import tf_keras
from elastimator.compat import private
from elastimator.optimizers import get_optimizer_instance_v2


def _train_twice(head, optimizer_for):
    """Runs two train steps of a one-weight logistic model whose optimizer `optimizer_for(global_step)` makes;
    returns (global step, weight) after them."""
    with tf.Graph().as_default():
        global_step = tf.compat.v1.train.get_or_create_global_step()
        weight = tf.compat.v1.get_variable("w", initializer=[[0.0]])
        logits = tf.matmul(tf.constant([[1.0], [2.0]]), weight)
        spec = head.create_estimator_spec({}, est.ModeKeys.TRAIN, logits, tf.constant([[1], [1]]),
                                          optimizer=optimizer_for(global_step), trainable_variables=[weight])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(spec.train_op)
            session.run(spec.train_op)
            return session.run([global_step, weight])


def test_a_head_takes_an_optimizer_whose_iterations_the_caller_made_the_global_step():
    def made_by_the_caller(global_step):  # TF Lattice's model_fn, and 2.15's own TF2 canned estimators
        optimizer = tf_keras().optimizers.legacy.SGD(0.5)
        optimizer.iterations = global_step
        return optimizer

    step, weight = _train_twice(est.BinaryClassHead(), made_by_the_caller)
    fresh_step, fresh_weight = _train_twice(est.BinaryClassHead(), lambda _: tf_keras().optimizers.legacy.SGD(0.5))
    assert step == fresh_step == 2  # the global step counts each update once, set by the caller or by the head
    assert weight == pytest.approx(fresh_weight) and weight[0][0] > 0


def test_get_optimizer_instance_v2_makes_tf_keras_legacy_optimizers_as_2_15_did():
    legacy = tf_keras().optimizers.legacy
    adagrad = get_optimizer_instance_v2("Adagrad")
    assert isinstance(adagrad, legacy.Adagrad)
    assert adagrad.get_config()["learning_rate"] == pytest.approx(0.001)  # the class's own default, as in 2.15
    assert get_optimizer_instance_v2("RMSProp", 0.3).get_config()["learning_rate"] == pytest.approx(0.3)
    adam = legacy.Adam(0.05)
    assert get_optimizer_instance_v2(adam) is adam
    assert get_optimizer_instance_v2(lambda: adam) is adam
    assert isinstance(get_optimizer_instance_v2(tf_keras().optimizers.Adam(0.2)), legacy.Adam)  # eagerly
    with pytest.raises(ValueError, match=r"unknown name 'adagrad'; expected one of \['Adagrad', 'Adam'"):
        get_optimizer_instance_v2("adagrad")
    with pytest.raises(ValueError, match="expected a tf.keras.optimizers.legacy optimizer.*got "
                                         ".*GradientDescentOptimizer"):
        get_optimizer_instance_v2(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    with tf.Graph().as_default(), pytest.raises(ValueError, match="use tf.keras.optimizers.legacy.Adam"):
        get_optimizer_instance_v2(tf_keras().optimizers.Adam(0.2))


def test_maybe_overwrite_model_dir_and_session_config(tmp_path):
    overwrite = private.maybe_overwrite_model_dir_and_session_config
    given = os.path.join(tmp_path, "given")
    assert overwrite(None, given).model_dir == given
    assert overwrite(est.RunConfig(model_dir=given, tf_random_seed=7), None).tf_random_seed == 7
    assert overwrite(est.RunConfig(model_dir=given), given).model_dir == given
    made = overwrite(est.RunConfig(), None).model_dir
    assert os.path.isdir(made)  # a new temporary directory, as 2.15 made
    with pytest.raises(ValueError, match="model_dir=.*differs from config.model_dir"):
        overwrite(est.RunConfig(model_dir=given), os.path.join(tmp_path, "other"))
    with pytest.raises(ValueError, match="config must be an elastimator.RunConfig.*got dict"):
        overwrite({"model_dir": given}, None)
    assert overwrite(None, given).session_config is None  # the Estimator's default for the task's role
