"""Head-based canned estimators (tf.estimator.LinearEstimator, DNNEstimator, DNNLinearCombinedEstimator,
BaselineEstimator) with every head, as the tf.estimator API docs show them. Prints `RESULT {json}`."""
import json
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
X = rng.normal(size=(512, 4)).astype("float32")
SCORE = X @ np.array([1.0, -2.0, 0.5, 1.5], "float32")
LABELS = {
    "binary": (SCORE > 0).astype("int64").reshape(-1, 1),
    "multi_class": np.digitize(SCORE, [-1.0, 1.0]).astype("int64").reshape(-1, 1),
    "multi_label": np.stack([SCORE > 0, X[:, 0] > 0, X[:, 1] < 0], axis=1).astype("int64"),
    "regression": SCORE.reshape(-1, 1),
}
HEADS = {
    "binary": lambda: tf.estimator.BinaryClassHead(),
    "multi_class": lambda: tf.estimator.MultiClassHead(n_classes=3),
    "multi_label": lambda: tf.estimator.MultiLabelHead(n_classes=3),
    "regression": lambda: tf.estimator.RegressionHead(),
}
COLUMNS = [tf.feature_column.numeric_column("x", shape=[4])]
ESTIMATORS = {
    "LinearEstimator": lambda head, d: tf.estimator.LinearEstimator(head, COLUMNS, model_dir=d, optimizer="Adam"),
    "DNNEstimator": lambda head, d: tf.estimator.DNNEstimator(head, [16], COLUMNS, model_dir=d, optimizer="Adam"),
    "DNNLinearCombinedEstimator": lambda head, d: tf.estimator.DNNLinearCombinedEstimator(
        head, model_dir=d, linear_feature_columns=COLUMNS, dnn_feature_columns=COLUMNS, dnn_hidden_units=[16],
        dnn_optimizer="Adam", linear_optimizer="Adam"),
    "BaselineEstimator": lambda head, d: tf.estimator.BaselineEstimator(head, model_dir=d, optimizer="Adam"),
}


def input_fn(labels, training):
    def fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, labels))
        return (dataset.shuffle(512, seed=1).repeat() if training else dataset).batch(64)
    return fn


def main(model_dir):
    results = {}
    for name, build in ESTIMATORS.items():
        for head_name, head in HEADS.items():
            estimator = build(head(), f"{model_dir}/{name}_{head_name}")
            estimator.train(input_fn(LABELS[head_name], True), steps=150)
            metrics = estimator.evaluate(input_fn(LABELS[head_name], False))
            key = {"binary": "accuracy", "multi_class": "accuracy", "multi_label": "auc",
                   "regression": "average_loss"}[head_name]
            results[f"{name}/{head_name}"] = float(metrics[key])
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
