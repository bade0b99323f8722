"""AdaNet's documented AutoEnsembleEstimator path (the class's docstring): learn to ensemble a linear and a DNN
model, given as a candidate pool of canned `tf.estimator.LinearEstimator` and `tf.estimator.DNNEstimator` built
for each iteration's config, sharing the ensemble's head; train for two iterations, evaluate, predict. AdaNet calls
each candidate's `estimator.model_fn` in a template, under scopes of its own. Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf

# A user fix AdaNet 0.9.0 needs on TensorFlow 2.15 too (not tf.estimator's): it imports graph_view from
# tensorflow.python.training.tracking, which TensorFlow 2.13 moved to tensorflow.python.checkpoint.
from tensorflow.python.checkpoint import graph_view  # noqa: E402

sys.modules.setdefault("tensorflow.python.training.tracking", type(sys)("tensorflow.python.training.tracking"))
sys.modules["tensorflow.python.training.tracking"].graph_view = graph_view
sys.modules.setdefault("tensorflow.python.training.tracking.graph_view", graph_view)

import adanet  # noqa: E402

rng = np.random.RandomState(0)
X = rng.normal(size=(512, 4)).astype("float32")
Y = ((X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3]) > 0).astype("int64").reshape(-1, 1)
FEATURE_COLUMNS = [tf.feature_column.numeric_column("x", shape=[4])]


def input_fn(training):
    def fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return (dataset.shuffle(512, seed=1).repeat() if training else dataset).batch(64)
    return fn


def _text(summary: bytes) -> str:
    """The text of a serialized text Summary (AdaNet reports its ensemble's architecture as one)."""
    value = tf.compat.v1.Summary.FromString(summary).value[0]
    return value.tensor.string_val[0].decode()


def main(model_dir):
    head = tf.estimator.BinaryClassHead()
    estimator = adanet.AutoEnsembleEstimator(
        head=head,
        candidate_pool=lambda config: {
            "linear": tf.estimator.LinearEstimator(
                head=head, feature_columns=FEATURE_COLUMNS, config=config,
                optimizer=tf.keras.optimizers.legacy.Ftrl(learning_rate=0.1)),
            "dnn": tf.estimator.DNNEstimator(
                head=head, feature_columns=FEATURE_COLUMNS, config=config,
                optimizer=tf.keras.optimizers.legacy.Adam(learning_rate=0.01), hidden_units=[16, 8]),
        },
        max_iteration_steps=40,
        config=tf.estimator.RunConfig(tf_random_seed=42),
        model_dir=model_dir)
    estimator.train(input_fn=input_fn(True), steps=80)
    metrics = estimator.evaluate(input_fn=input_fn(False))
    predictions = list(estimator.predict(input_fn=input_fn(False)))
    variables = estimator.get_variable_names()
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items() if not isinstance(v, bytes)},
        "architecture": {k: _text(v) for k, v in metrics.items() if isinstance(v, bytes)},
        "prediction_keys": sorted(predictions[0]),
        "prediction_shapes": {k: list(np.asarray(v).shape) for k, v in sorted(predictions[0].items())},
        "probabilities": [round(float(p["probabilities"][1]), 4) for p in predictions[:8]],
        "candidate_variables": sorted(v for v in variables if "/model_fn/" in v and "/Adam" not in v
                                      and "/Ftrl" not in v),
        "latest_checkpoint": estimator.latest_checkpoint().rsplit("/", 1)[-1],
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
