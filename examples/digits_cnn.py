"""The CNN from the Estimator guide, on scikit-learn's handwritten digits (offline).

The model_fn below is the guide's `cnn_model_fn` as written for tf.estimator,
with two changes only: TF1 names carry their `tf.compat.v1` prefix, and the
input is 8x8 (the digits data set) instead of MNIST's 28x28.

Run:  .venv/bin/python examples/digits_cnn.py [--model-dir DIR] [--steps N]   (after `bash scripts/setup.sh`)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile

import numpy as np

import elastimator as est  # before TensorFlow: its load-time native lines are then held back
import tensorflow as tf  # noqa: E402  pylint: disable=wrong-import-order


def cnn_model_fn(features, labels, mode):
    """Model function for CNN."""
    # Input Layer
    input_layer = tf.reshape(features["x"], [-1, 8, 8, 1])

    # Convolutional Layer #1
    conv1 = tf.compat.v1.layers.conv2d(
        inputs=input_layer,
        filters=32,
        kernel_size=[5, 5],
        padding="same",
        activation=tf.nn.relu)

    # Pooling Layer #1
    pool1 = tf.compat.v1.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)

    # Convolutional Layer #2 and Pooling Layer #2
    conv2 = tf.compat.v1.layers.conv2d(
        inputs=pool1,
        filters=64,
        kernel_size=[5, 5],
        padding="same",
        activation=tf.nn.relu)
    pool2 = tf.compat.v1.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)

    # Dense Layer
    pool2_flat = tf.reshape(pool2, [-1, 2 * 2 * 64])
    dense = tf.compat.v1.layers.dense(inputs=pool2_flat, units=1024, activation=tf.nn.relu)
    dropout = tf.compat.v1.layers.dropout(
        inputs=dense, rate=0.4, training=mode == est.ModeKeys.TRAIN)

    # Logits Layer
    logits = tf.compat.v1.layers.dense(inputs=dropout, units=10)

    predictions = {
        # Generate predictions (for PREDICT and EVAL mode)
        "classes": tf.argmax(input=logits, axis=1),
        # Add `softmax_tensor` to the graph. It is used for PREDICT and by the
        # `logging_hook`.
        "probabilities": tf.nn.softmax(logits, name="softmax_tensor")
    }
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode=mode, predictions=predictions)

    # Calculate Loss (for both TRAIN and EVAL modes)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)

    # Configure the Training Op (for TRAIN mode)
    if mode == est.ModeKeys.TRAIN:
        optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=0.001)
        train_op = optimizer.minimize(
            loss=loss,
            global_step=tf.compat.v1.train.get_global_step())
        return est.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

    # Add evaluation metrics (for EVAL mode)
    eval_metric_ops = {
        "accuracy": tf.compat.v1.metrics.accuracy(
            labels=labels, predictions=predictions["classes"])
    }
    return est.EstimatorSpec(
        mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


def load_digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's 1,797 8x8 digits (pixel values 0-16); a fixed 1,500 / 297 split."""
    from sklearn.datasets import load_digits as sklearn_digits

    x, y = sklearn_digits(return_X_y=True)
    x = x.astype(np.float32)
    y = y.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return x[:1500], y[:1500], x[1500:], y[1500:]


SERVE_SCRIPT = """
import json, sys, numpy as np, tensorflow as tf
export_dir, inputs = sys.argv[1], np.load(sys.argv[2])
serve = tf.saved_model.load(export_dir).signatures["serving_default"]
out = serve(x=tf.constant(inputs))
print(json.dumps({"classes": out["classes"].numpy().tolist(),
                  "probabilities": out["probabilities"].numpy().tolist()}))
"""


def serve_in_fresh_process(export_dir: str, inputs: np.ndarray) -> dict:
    """Loads the SavedModel with plain TensorFlow in a new Python process and predicts."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "inputs.npy")
        np.save(path, inputs)
        out = subprocess.run([sys.executable, "-c", SERVE_SCRIPT, export_dir, path],
                             check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=os.path.join(tempfile.gettempdir(), "elastimator-digits"))
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    train_x, train_y, test_x, test_y = load_digits()
    classifier = est.Estimator(
        model_fn=cnn_model_fn, model_dir=args.model_dir,
        config=est.RunConfig(save_checkpoints_steps=1000, log_step_count_steps=500, tf_random_seed=1),
    )
    # Raw 0-16 pixel values (not scaled to [0, 1]) let the guide's plain SGD at
    # learning rate 0.001 converge in a few thousand steps on this small data set.
    train_input_fn = est.inputs.numpy_input_fn(
        x={"x": train_x}, y=train_y, batch_size=100, num_epochs=None, shuffle=True)
    logging_hook = tf.compat.v1.train.LoggingTensorHook(tensors={"probabilities": "softmax_tensor"},
                                                        every_n_iter=1000)
    classifier.train(input_fn=train_input_fn, max_steps=args.steps, hooks=[logging_hook])

    eval_input_fn = est.inputs.numpy_input_fn(x={"x": test_x}, y=test_y, num_epochs=1, shuffle=False)
    metrics = classifier.evaluate(input_fn=eval_input_fn)
    predicted = [p["classes"] for p in classifier.predict(
        est.inputs.numpy_input_fn(x={"x": test_x}, num_epochs=1, shuffle=False))]

    export_dir = classifier.export_saved_model(
        os.path.join(args.model_dir, "export"),
        est.export.build_raw_serving_input_receiver_fn({"x": test_x[:1]}),
    ).decode()
    served = serve_in_fresh_process(export_dir, test_x)
    agree = float(np.mean(np.asarray(served["classes"]) == np.asarray(predicted)))
    summary = {
        "accuracy": round(float(metrics["accuracy"]), 4),
        "loss": round(float(metrics["loss"]), 4),
        "global_step": int(metrics["global_step"]),
        "export_dir": export_dir,
        "served_matches_predict": agree,
    }
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
