"""AdaNet's documented Estimator path (its README and `adanet.examples.simple_dnn`): an `adanet.Estimator` that
grows an ensemble of DNN subnetworks over three iterations on a binary task, then evaluates, predicts, exports,
and serves the export. Prints `RESULT {json}`.

AdaNet 0.9.0 reaches past tf.estimator's public API: `tf.compat.v2.compat.v1.estimator`, the private `util`
module, `Estimator._create_and_assert_global_step`, a scaffold whose local_init_op is grouped with the default
one in evaluation, and a `checkpoint` state file pointed at `increment.ckpt-N`.
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
from adanet.examples import simple_dnn  # noqa: E402

rng = np.random.RandomState(0)
X = rng.normal(size=(512, 4)).astype("float32")
Y = ((X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3]) > 0).astype("float32").reshape(-1, 1)
COLUMNS = [tf.feature_column.numeric_column("x", shape=[4])]


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
    estimator = adanet.Estimator(
        head=tf.estimator.BinaryClassHead(),
        subnetwork_generator=simple_dnn.Generator(feature_columns=COLUMNS, optimizer=tf.compat.v1.train.AdamOptimizer(0.01),
                                                  layer_size=8, learn_mixture_weights=True,
                                                  seed=42),
        max_iteration_steps=40,
        evaluator=adanet.Evaluator(input_fn=input_fn(False), steps=None),
        config=tf.estimator.RunConfig(tf_random_seed=42),
        model_dir=model_dir)
    estimator.train(input_fn(True), max_steps=120)
    metrics = estimator.evaluate(input_fn(False))
    predictions = list(estimator.predict(input_fn(False)))
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.constant(X[:1])})
    export_dir = estimator.export_saved_model(model_dir + "/export", receiver)
    loaded = tf.saved_model.load(export_dir)
    served = loaded.signatures["predict"](x=tf.constant(X[:8]))
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items() if not isinstance(v, bytes)},
        "architecture": {k: _text(v) for k, v in metrics.items() if isinstance(v, bytes)},
        "prediction_keys": sorted(predictions[0]),
        "prediction_shapes": {k: list(np.asarray(v).shape) for k, v in sorted(predictions[0].items())},
        "probabilities": [round(float(p["probabilities"][1]), 4) for p in predictions[:8]],
        "signatures": sorted(loaded.signatures),
        "served_keys": sorted(served),
        "served_probabilities": [round(float(p), 4) for p in served["probabilities"].numpy()[:, 1]],
        "latest_checkpoint": estimator.latest_checkpoint().rsplit("/", 1)[-1],
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
