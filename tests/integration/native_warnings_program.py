"""Every path that keeps or reuses a graph, in one process, for test_native_warnings.py: the README's example
(train, then predict twice), a custom model_fn's train/evaluate/predict/export with second calls of each verb and
a second train call, a canned estimator's, an evaluation long enough to run several batches per session call (in a
kept graph, then afresh under a hook), and train_and_evaluate. Prints `DONE` at the end.

    python native_warnings_program.py MODEL_ROOT
"""
import os
import sys

import numpy as np
import tensorflow as tf

import elastimator as est

root = sys.argv[1]
rng = np.random.RandomState(0)
x = rng.rand(384, 4).astype("float32")
y = (x[:, 0] * 3).astype("int64")  # three classes


def model_fn(features, labels, mode):
    logits = tf.compat.v1.layers.dense(features["x"], 3)
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"classes": tf.argmax(logits, 1)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(loss, tf.compat.v1.train.get_global_step())
    metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))}
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def input_fn(epochs=1, shuffle=False, labels=True, batch=128):
    return est.inputs.numpy_input_fn({"x": x}, y if labels else None, batch_size=batch, num_epochs=epochs,
                                     shuffle=shuffle)


def receiver():
    placeholder = tf.compat.v1.placeholder(tf.float32, [None, 4])
    return est.export.ServingInputReceiver({"x": placeholder}, {"x": placeholder})


class PlainHook(tf.compat.v1.train.SessionRunHook):
    """A caller's hook: its evaluation is built afresh and run in a monitored session."""


readme = est.Estimator(model_fn, model_dir=os.path.join(root, "readme"))
readme.train(input_fn(None, True), max_steps=100)
for _ in range(2):
    list(readme.predict(input_fn(labels=False)))

custom = est.Estimator(model_fn, model_dir=os.path.join(root, "custom"))
custom.train(input_fn(None, True), steps=30)
for _ in range(2):
    custom.evaluate(input_fn())
    list(custom.predict(input_fn(labels=False)))
custom.train(input_fn(None, True), steps=30)  # a second train call (its graph kept), after the other verbs
custom.train(input_fn(None, True), steps=30)  # one right after a train call
custom.evaluate(input_fn())
custom.export_saved_model(os.path.join(root, "custom_export"), receiver)

columns = [tf.feature_column.numeric_column("x", shape=[4])]
canned = est.DNNClassifier([8], columns, n_classes=3, model_dir=os.path.join(root, "canned"))
canned.train(input_fn(None, True), steps=30)
for _ in range(2):
    canned.evaluate(input_fn())
    list(canned.predict(input_fn(labels=False)))
canned.export_saved_model(os.path.join(root, "canned_export"),
                          est.export.build_parsing_serving_input_receiver_fn(
                              tf.feature_column.make_parse_example_spec(columns)))

long = est.Estimator(model_fn, model_dir=os.path.join(root, "long"))
long.train(input_fn(None, True), steps=10)
for _ in range(2):
    long.evaluate(input_fn(batch=1))  # 384 batches: past 300 the kept graph builds its loop of several batches
long.evaluate(input_fn(batch=1), hooks=[PlainHook()])

both = est.Estimator(model_fn, model_dir=os.path.join(root, "both"))
est.train_and_evaluate(both, est.TrainSpec(input_fn(None, True), max_steps=60),
                       est.EvalSpec(input_fn(), throttle_secs=0,
                                    exporters=[est.LatestExporter("latest", receiver)]))
print("DONE")
