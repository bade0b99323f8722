"""The Estimator guide's custom estimator (iris, model_fn with feature columns and tf.compat.v1.layers),
trained with RunConfig(train_distribute=tf.distribute.MirroredStrategy()) as the guide's distributed
example does, with evaluation results read from TensorFlow's log. Prints `RESULT {json}`."""
import json
import logging
import sys

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_iris


def my_model(features, labels, mode, params):
    net = tf.compat.v1.feature_column.input_layer(features, params["feature_columns"])
    for units in params["hidden_units"]:
        net = tf.compat.v1.layers.dense(net, units=units, activation=tf.nn.relu)
    logits = tf.compat.v1.layers.dense(net, params["n_classes"], activation=None)
    predicted_classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class_ids": predicted_classes[:, tf.newaxis]})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    accuracy = tf.compat.v1.metrics.accuracy(labels=labels, predictions=predicted_classes, name="acc_op")
    metrics = {"accuracy": accuracy}
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def main(model_dir):
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    lines = Lines()
    tf.get_logger().addHandler(lines)
    x, y = load_iris(return_X_y=True)
    x = x.astype("float32")
    columns = [tf.feature_column.numeric_column("x", shape=[4])]
    strategy = tf.distribute.MirroredStrategy()
    config = tf.estimator.RunConfig(train_distribute=strategy, tf_random_seed=1)
    classifier = tf.estimator.Estimator(model_fn=my_model, model_dir=model_dir, config=config,
                                        params={"feature_columns": columns, "hidden_units": [10, 10], "n_classes": 3})

    def input_fn(training):
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y.astype("int32")))
        return (dataset.shuffle(150, seed=1).repeat() if training else dataset).batch(16)

    classifier.train(input_fn=lambda: input_fn(True), steps=400)
    result = classifier.evaluate(input_fn=lambda: input_fn(False))
    logged = [line for line in lines.lines if line.startswith("Saving dict for global step")]
    print("RESULT " + json.dumps({"accuracy": float(result["accuracy"]), "global_step": int(result["global_step"]),
                                  "replicas": strategy.num_replicas_in_sync, "logged": logged[-1:],
                                  "accuracy_type": type(result["accuracy"]).__name__}))


if __name__ == "__main__":
    main(sys.argv[1])
