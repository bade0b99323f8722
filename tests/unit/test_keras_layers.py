"""Keras 3 layers in a model_fn: the three graph-mode traps are handled, never silent."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import ModelFnError
from tests.helpers import eval_input, train_input


def _classifier(features, labels, mode, logits, extra_loss=None, metrics=None):
    predictions = {"classes": tf.argmax(logits, 1)}
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions=predictions)
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))
    if extra_loss is not None:
        loss += extra_loss
    train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(loss, tf.compat.v1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics or {})


def test_keras3_dense_layers_train(tmp_path, iris):
    x, y = iris

    def model_fn(features, labels, mode):
        hidden = keras.layers.Dense(16, activation="relu")(features["x"])
        hidden = keras.layers.Dropout(0.1)(hidden, training=mode == est.ModeKeys.TRAIN)
        return _classifier(features, labels, mode, keras.layers.Dense(3)(hidden))

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path), config=est.RunConfig(tf_random_seed=7))
    estimator.train(train_input(x, y), steps=200)
    assert estimator.evaluate(eval_input(x, y))["loss"] < 0.3


def test_dropout_with_a_tensor_training_flag_explains_the_fix(tmp_path, iris):
    def model_fn(features, labels, mode):
        training = tf.constant(mode == est.ModeKeys.TRAIN)
        hidden = keras.layers.Dropout(0.5)(features["x"], training=training)
        return _classifier(features, labels, mode, keras.layers.Dense(3)(hidden))

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ModelFnError, match=r"pass training=\(mode == ModeKeys.TRAIN\)"):
        estimator.train(train_input(*iris), steps=1)
    assert estimator.latest_checkpoint() is None


def test_batch_normalization_moving_statistics_are_updated(tmp_path, iris):
    x, y = iris

    def model_fn(features, labels, mode):
        normalized = keras.layers.BatchNormalization(momentum=0.5, name="bn")(
            features["x"], training=mode == est.ModeKeys.TRAIN)
        return _classifier(features, labels, mode, keras.layers.Dense(3)(normalized))

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path), config=est.RunConfig(tf_random_seed=7))
    estimator.train(train_input(x, y, batch_size=150), steps=30)
    names = estimator.get_variable_names()
    mean_name = next(n for n in names if n.endswith("moving_mean"))
    variance_name = next(n for n in names if n.endswith("moving_variance"))
    # With momentum 0.5 and full-batch steps, 30 updates converge to the data's statistics.
    np.testing.assert_allclose(estimator.get_variable_value(mean_name), x.mean(axis=0), rtol=1e-3)
    np.testing.assert_allclose(estimator.get_variable_value(variance_name), x.var(axis=0), rtol=0.02)
    assert estimator.evaluate(eval_input(x, y))["loss"] < 0.5


def test_regularizers_missing_from_the_loss_are_an_error(tmp_path, iris):
    def model_fn(features, labels, mode):
        dense = keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(0.1), name="reg_dense")
        logits = dense(features["x"])
        # What TF1 code did; with Keras 3 the collection is empty and this adds 0.
        return _classifier(features, labels, mode, logits, tf.compat.v1.losses.get_regularization_loss())

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path))
    with pytest.raises(ModelFnError, match=r"reg_dense/kernel.*loss = data_loss \+ tf.add_n\(model.losses\)"):
        estimator.train(train_input(*iris), steps=1)


def test_regularizers_added_from_layer_losses_are_applied(tmp_path, iris):
    x, y = iris
    strengths = {}

    def model_fn(features, labels, mode, params):
        dense = keras.layers.Dense(3, kernel_regularizer=keras.regularizers.L2(params["l2"]))
        logits = dense(features["x"])
        return _classifier(features, labels, mode, logits, tf.add_n(dense.losses))

    for l2 in (0.0, 1.0):
        estimator = est.Estimator(model_fn, model_dir=str(tmp_path / str(l2)), params={"l2": l2},
                                  config=est.RunConfig(tf_random_seed=3))
        estimator.train(train_input(x, y), steps=100)
        kernel = next(n for n in estimator.get_variable_names() if n.endswith("kernel"))
        strengths[l2] = float(np.sum(np.square(estimator.get_variable_value(kernel))))
    assert strengths[1.0] < 0.5 * strengths[0.0]


def test_keras_metric_objects_as_eval_metric_ops(tmp_path, iris):
    x, y = iris

    def model_fn(features, labels, mode):
        logits = keras.layers.Dense(3)(features["x"])
        metrics = None
        if mode == est.ModeKeys.EVAL:
            accuracy = keras.metrics.SparseCategoricalAccuracy()
            accuracy.update_state(labels, logits)
            metrics = {"keras_accuracy": accuracy,
                       "v1_accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))}
        return _classifier(features, labels, mode, logits, metrics=metrics)

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path))
    estimator.train(train_input(x, y), steps=100)
    first = estimator.evaluate(eval_input(x, y, batch_size=40))
    second = estimator.evaluate(eval_input(x, y, batch_size=40))
    assert first["keras_accuracy"] == pytest.approx(first["v1_accuracy"]) and first["keras_accuracy"] > 0.8
    assert second["keras_accuracy"] == pytest.approx(first["keras_accuracy"])  # reset between evaluations


def test_keras_metric_never_updated_is_an_error(tmp_path, iris):
    def model_fn(features, labels, mode):
        logits = keras.layers.Dense(3)(features["x"])
        metrics = {"acc": keras.metrics.SparseCategoricalAccuracy()} if mode == est.ModeKeys.EVAL else None
        return _classifier(features, labels, mode, logits, metrics=metrics)

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path))
    estimator.train(train_input(*iris), steps=1)
    with pytest.raises(ModelFnError, match=r"eval_metric_ops\['acc'\] was never updated.*update_state"):
        estimator.evaluate(eval_input(*iris))


def test_tf1_layers_and_tf_keras_run_beside_keras3():
    with tf.Graph().as_default():
        assert tf.compat.v1.layers.dense(tf.ones([2, 3]), 4).shape == (2, 4)
        assert type(tf.keras.layers.Dense(1)).__module__.startswith("tf_keras")
        assert type(keras.layers.Dense(1)).__module__.startswith("keras")
