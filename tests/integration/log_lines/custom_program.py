"""A custom model_fn Estimator as the Estimator guide writes it: trains, evaluates, predicts and exports.

    python custom_program.py MODEL_DIR [info|default|basic_config]

info (the default) sets `tf.compat.v1.logging.set_verbosity(INFO)`, as most tf.estimator programs do; default
leaves TensorFlow's verbosity alone; basic_config sets it and also calls `logging.basicConfig(level=INFO)`.
"""

import logging
import sys

import numpy as np
import tensorflow as tf

model_dir, screen = sys.argv[1], (sys.argv[2:] or ["info"])[0]
if screen == "basic_config":
    logging.basicConfig(level=logging.INFO)
if screen != "default":
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
rng = np.random.RandomState(0)
x = rng.normal(size=(256, 3)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int64")


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    predictions = {"class": tf.argmax(logits, 1)}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, export_outputs={
            "serving_default": tf.estimator.export.PredictOutput(predictions)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels, predictions["class"])}
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def serving_input_receiver_fn():
    inputs = tf.compat.v1.placeholder(tf.float32, [None, 3])
    return tf.estimator.export.ServingInputReceiver({"x": inputs}, {"x": inputs})


estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir)
estimator.train(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=16, num_epochs=None,
                                                              shuffle=True), steps=250)
estimator.evaluate(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=64, shuffle=False))
predictions = list(estimator.predict(tf.compat.v1.estimator.inputs.numpy_input_fn({"x": x[:8]}, shuffle=False)))
estimator.export_saved_model(model_dir + "/export", serving_input_receiver_fn)
print("DONE", len(predictions))
