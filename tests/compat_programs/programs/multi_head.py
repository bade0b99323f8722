"""A multi-task model with tf.estimator.MultiHead, as its API reference shows it: a topic (3 classes) and a click
(binary) head over one DNN, labels as a dict keyed by head name. Trains, evaluates, predicts, exports, and uses the
head's own loss() / metrics() / update_metrics(). Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
X = rng.normal(size=(512, 4)).astype("float32")
TOPIC = np.digitize(X[:, 0] - X[:, 1], [-0.7, 0.7]).astype("int64").reshape(-1, 1)
CLICK = (X[:, 2] + 0.5 * X[:, 3] > 0).astype("int64").reshape(-1, 1)
COLUMNS = [tf.feature_column.numeric_column("x", shape=[4])]


def heads():
    return [tf.estimator.MultiClassHead(3, name="topic"), tf.estimator.BinaryClassHead(name="click")]


def input_fn(training):
    def fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, {"topic": TOPIC, "click": CLICK}))
        return (dataset.shuffle(512, seed=1).repeat() if training else dataset).batch(64)
    return fn


def head_api():
    """The MultiHead's own API in a graph, on fixed logits and labels."""
    with tf.Graph().as_default():
        head = tf.estimator.MultiHead(heads(), head_weights=[1.0, 2.0])
        logits = {"topic": tf.constant(np.linspace(-1, 1, 48).reshape(16, 3).astype("float32")),
                  "click": tf.constant(np.linspace(-2, 2, 16).reshape(16, 1).astype("float32"))}
        labels = {"topic": tf.constant(TOPIC[:16]), "click": tf.constant(CLICK[:16])}
        features = {"x": tf.constant(X[:16])}
        loss = head.loss(labels, logits, features=features)
        metrics = head.metrics()
        keys_before = sorted(metrics)
        updated = head.update_metrics(metrics, features, logits, labels)
        results = {key: metric.result() for key, metric in updated.items()}
        flat = tf.concat([logits["topic"], logits["click"]], axis=-1)  # one tensor, split in head order
        split_loss = head.loss(labels, flat, features=features)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.variables_initializer([v for m in updated.values() for v in m.variables]))
            session.run([update for metric in updated.values() for update in metric.updates])
            values = {key: float(np.asarray(session.run(value)).reshape(-1)[0]) for key, value in results.items()}
            return {"name": head.name, "logits_dimension": head.logits_dimension, "loss": float(session.run(loss)),
                    "split_loss": float(session.run(split_loss)), "metric_keys_before_update": keys_before,
                    "metric_values": values}


def main(model_dir):
    estimator = tf.estimator.DNNEstimator(tf.estimator.MultiHead(heads()), [16], COLUMNS, model_dir=model_dir,
                                          optimizer="Adam")
    estimator.train(input_fn(True), steps=300)
    metrics = estimator.evaluate(input_fn(False))
    prediction = next(iter(estimator.predict(input_fn(False))))
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.constant(X[:1])})
    export = estimator.export_saved_model(os.path.join(model_dir, "export"), receiver).decode()
    signatures = tf.saved_model.load(export).signatures
    result = {
        "metrics": {key: float(value) for key, value in metrics.items()},
        "predictions": {"/".join(key): [np.asarray(value).dtype.name, list(np.asarray(value).shape)]
                        for key, value in prediction.items()},
        "signatures": {name: sorted(fn.structured_outputs) for name, fn in signatures.items()},
        "head_api": head_api(),
    }
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
