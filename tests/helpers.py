"""Model functions, inputs and event readers shared by the tests."""

from __future__ import annotations

import os
from pathlib import Path

import tensorflow as tf

import elastimator as est
from elastimator.cluster import plan


def linear_model_fn(features, labels, mode, params):
    """A softmax classifier over features["x"], with accuracy as an eval metric."""
    logits = tf.compat.v1.layers.dense(features["x"], params.get("n_classes", 3), name="logits")
    predictions = {"classes": tf.argmax(logits, 1), "probabilities": tf.nn.softmax(logits)}
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions=predictions)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    optimizer = tf.compat.v1.train.AdamOptimizer(params.get("learning_rate", 0.05))
    train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
    metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels, predictions["classes"])}
    return est.EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op, eval_metric_ops=metrics)


class SavedSteps(tf.compat.v1.train.CheckpointSaverListener):
    """A saving listener that records the global step of every checkpoint saved (`saved_steps`)."""

    def __init__(self):
        self.saved_steps = []

    def after_save(self, session, global_step_value):
        self.saved_steps.append(global_step_value)


def train_input(x, y, batch_size=32, num_epochs=None):
    return est.inputs.numpy_input_fn({"x": x}, y, batch_size=batch_size, num_epochs=num_epochs, shuffle=True)


def eval_input(x, y=None, batch_size=64):
    return est.inputs.numpy_input_fn({"x": x}, y, batch_size=batch_size, num_epochs=1, shuffle=False)


def regression_model_fn(features, labels, mode):
    """y ~ x @ w + b over features["x"] [batch, 3], from zeros, by plain gradient descent (0.1) on the mean squared
    error: deterministic, so runs that see the same batches end with the same weights."""
    weights = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    bias = tf.compat.v1.get_variable("b", [1], initializer=tf.zeros_initializer())
    predictions = tf.matmul(features["x"], weights) + bias
    loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, predictions=predictions)


def read_events(directory: str) -> dict[str, list[tuple[int, float]]]:
    """Scalar summaries in a directory's event files: tag -> [(step, value)]."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


def free_ports(n: int) -> list[int]:
    """n loopback ports free right now, for real servers that a test starts later (below the ephemeral range,
    as the launcher picks them)."""
    return plan.free_ports("127.0.0.1", n)


class SignalAtStep(tf.compat.v1.train.SessionRunHook):
    """Sends this process `signum` after global step `step` (as a person or Kubernetes would, mid-training)."""

    def __init__(self, signum, step):
        self.signum, self.step = signum, step

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def after_run(self, run_context, run_values):
        if run_context.session.run(self._global_step) == self.step:
            os.kill(os.getpid(), self.signum)


class BlockAtStep(tf.compat.v1.train.SessionRunHook):
    """At global step `step`, the session call waits on an empty queue: native code, as a step waiting for a
    parameter server that is gone does, where Python runs no signal handler until it returns."""

    def __init__(self, step):
        self.step, self.steps = step, 0

    def begin(self):
        self._dequeue = tf.queue.FIFOQueue(1, tf.float32, shapes=[[]]).dequeue()

    def before_run(self, run_context):
        self.steps += 1
        if self.steps == self.step:
            print("blocked", flush=True)
            return tf.compat.v1.train.SessionRunArgs(self._dequeue)
        return None


DLROVER_EXAMPLES = Path(os.environ.get("ELASTIMATOR_SHARED", Path(__file__).resolve().parents[1].parent / "shared")
                        ) / "dlrover-examples"
"""DLRover's own examples (shared/ beside the checkout, or ELASTIMATOR_SHARED): tests that need them skip without,
and the test run says so at its start and its end."""
