"""A train op that model_fn built and did not return is not run (tf.estimator 2.15 ran the returned one only),
while Keras 3 layers' own state updates, which nothing in a graph runs, still are.

The model_fn builds an Adam minimize and returns an Adagrad one, as Neural Structured Learning's regularizers
replace the base model's train op. The values are those tf.estimator 2.15 gave the same model_fn (recorded with
tests/compat_programs/programs/discarded_train_op.py): the global step counts each of the 30 steps once, the
dropped Adam's slots stay 0.0 and its beta powers at their initial 0.9 and 0.999.
"""

import keras
import numpy as np

import elastimator as est

import tensorflow as tf

_X = (np.random.RandomState(0).normal(size=(64, 3)) + 2.0).astype("float32")
_Y = (_X @ np.array([1.0, -2.0, 0.5], "float32")).reshape(-1, 1)


def _input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": _X}, _Y)).repeat().batch(64)


def _model_fn(normalize):
    def model_fn(features, labels, mode):
        x = normalize(features["x"], mode)
        w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
        loss = tf.reduce_mean(tf.square(x @ w - labels))
        global_step = tf.compat.v1.train.get_global_step()
        with tf.compat.v1.variable_scope("dropped"):
            tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, global_step=global_step)
        with tf.compat.v1.variable_scope("returned"):
            train_op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(2 * loss, global_step=global_step)
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)
    return model_fn


def _trained(tmp_path, normalize) -> dict:
    estimator = est.Estimator(_model_fn(normalize), model_dir=str(tmp_path), config=est.RunConfig(tf_random_seed=1))
    estimator.train(_input_fn, steps=30)
    return {name: estimator.get_variable_value(name) for name in estimator.get_variable_names()}


def test_a_dropped_optimizer_never_runs(tmp_path):
    values = _trained(tmp_path, lambda x, mode: x)
    assert values["global_step"] == 30  # 32 when the dropped Adam's increment ran too
    np.testing.assert_array_equal(values["dropped/w/Adam"], 0.0)  # |m| 0.26 when it ran
    np.testing.assert_array_equal(values["dropped/w/Adam_1"], 0.0)
    assert values["dropped/beta1_power"] == np.float32(0.9) and values["dropped/beta2_power"] == np.float32(0.999)


def test_keras3_batch_normalization_beside_a_dropped_optimizer_keeps_its_moving_statistics(tmp_path):
    def normalize(x, mode):
        return keras.layers.BatchNormalization(momentum=0.5, name="bn")(x, training=mode == est.ModeKeys.TRAIN)

    values = _trained(tmp_path, normalize)
    assert values["global_step"] == 30
    np.testing.assert_array_equal(values["dropped/w/Adam"], 0.0)
    mean = next(value for name, value in values.items() if name.endswith("moving_mean"))
    # Momentum 0.5 over 30 full-batch steps: the data's mean.
    np.testing.assert_allclose(mean, _X.mean(axis=0), rtol=1e-4)


def test_an_update_computed_from_a_gradient_is_an_optimizers_and_never_runs_dropped(tmp_path):
    # A non-fused optimizer keeps its slots with assigns of its gradients; dropped, 2.15 never ran them.
    def normalize(x, mode):
        del mode
        momentum = tf.compat.v1.get_variable("momentum", [3], initializer=tf.compat.v1.zeros_initializer(),
                                             trainable=False)
        tf.compat.v1.assign(momentum, 0.9 * momentum + tf.gradients(tf.reduce_sum(tf.square(x)), x)[0][0])
        return x

    values = _trained(tmp_path, normalize)
    np.testing.assert_array_equal(values["momentum"], 0.0)
