"""What each canned estimator and head predicts and reports: prediction keys with their dtypes and shapes,
evaluation metric keys, and the heads' own `metrics()` / `update_metrics()` / `predictions(keys=)`, written from
the tf.estimator API reference. Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf

X = np.random.RandomState(0).normal(size=(64, 3)).astype("float32")
SCORE = X @ np.array([1.0, -1.0, 0.5], "float32")
BINARY = (SCORE > 0).astype("int64").reshape(-1, 1)
MULTI = np.digitize(SCORE, [-0.5, 0.5]).astype("int64").reshape(-1, 1)
MULTI_HOT = np.stack([SCORE > 0, X[:, 0] > 0, X[:, 1] < 0], axis=1).astype("int64")
REGRESSION = SCORE.reshape(-1, 1)
COUNTS = np.round(np.abs(REGRESSION) * 3).astype("float32")
COLUMNS = [tf.feature_column.numeric_column("x", shape=[3])]


def input_fn(labels):
    return lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, labels)).batch(16)


def described(value):
    value = np.asarray(value)
    return [value.dtype.name, list(value.shape)]


def canned(model_dir):
    v1 = tf.compat.v1.estimator
    return {
        "DNNClassifier/binary": (tf.estimator.DNNClassifier([4], COLUMNS, model_dir=f"{model_dir}/a"), BINARY),
        "DNNClassifier/multi": (tf.estimator.DNNClassifier([4], COLUMNS, n_classes=3, model_dir=f"{model_dir}/b"),
                                MULTI),
        "LinearClassifier/vocabulary": (tf.estimator.LinearClassifier(
            COLUMNS, n_classes=3, label_vocabulary=["a", "b", "c"], model_dir=f"{model_dir}/c"),
            np.array(["a", "b", "c"])[MULTI]),
        "LinearRegressor": (tf.estimator.LinearRegressor(COLUMNS, model_dir=f"{model_dir}/d"), REGRESSION),
        "DNNEstimator/multi_label": (tf.estimator.DNNEstimator(
            tf.estimator.MultiLabelHead(3), [4], COLUMNS, model_dir=f"{model_dir}/e"), MULTI_HOT),
        "BaselineClassifier": (tf.estimator.BaselineClassifier(model_dir=f"{model_dir}/f"), BINARY),
        "v1.DNNClassifier/binary": (v1.DNNClassifier([4], COLUMNS, model_dir=f"{model_dir}/g"), BINARY),
        "v1.LinearClassifier/multi": (v1.LinearClassifier(COLUMNS, n_classes=3, model_dir=f"{model_dir}/h"), MULTI),
        "DNNEstimator/poisson": (tf.estimator.DNNEstimator(
            tf.estimator.PoissonRegressionHead(), [4], COLUMNS, model_dir=f"{model_dir}/j"), COUNTS),
        "LinearEstimator/logistic": (tf.estimator.LinearEstimator(
            tf.estimator.LogisticRegressionHead(), COLUMNS, model_dir=f"{model_dir}/k"), BINARY.astype("float32")),
        "DNNLinearCombinedRegressor/inverse_link": (tf.estimator.DNNLinearCombinedEstimator(
            tf.estimator.RegressionHead(inverse_link_fn=tf.math.exp), linear_feature_columns=COLUMNS,
            dnn_feature_columns=COLUMNS, dnn_hidden_units=[4], model_dir=f"{model_dir}/i"), REGRESSION),
    }


HEADS = {  # name: (head, labels, logits dimension); "class" in the name: it takes predictions(keys=)
    "binary_class": (lambda: tf.estimator.BinaryClassHead(thresholds=[0.3]), BINARY, 1),
    "multi_class": (lambda: tf.estimator.MultiClassHead(3), MULTI, 3),
    "multi_label_class": (lambda: tf.estimator.MultiLabelHead(3, thresholds=[0.3], classes_for_class_based_metrics=[1]),
                    MULTI_HOT, 3),
    "regression": (lambda: tf.estimator.RegressionHead(), REGRESSION, 1),
    "poisson": (lambda: tf.estimator.PoissonRegressionHead(), COUNTS, 1),
    "logistic": (lambda: tf.estimator.LogisticRegressionHead(), BINARY.astype("float32"), 1),
}


def head_api(result):
    """Each head's own API in a graph: metrics() before and after update_metrics(), predictions(keys=) (which
    2.15's RegressionHead did not take)."""
    for name, (make, labels, units) in HEADS.items():
        with tf.Graph().as_default():
            head = make()
            logits = tf.constant(np.linspace(-1, 1, 16 * units).reshape(16, units).astype("float32"))
            metrics = head.metrics(regularization_losses=[tf.constant(0.5)])
            updated = head.update_metrics(metrics, {"x": tf.constant(X[:16])}, logits, tf.constant(labels[:16]),
                                          regularization_losses=[tf.constant(0.5)])
            keys = sorted(head.predictions(logits))
            chosen = sorted(head.predictions(logits, keys=keys[:1])) if "class" in name else keys
            loss = head.loss(tf.constant(labels[:16]), logits, features={"x": tf.constant(X[:16])})
            results = {key: metric.result() for key, metric in updated.items()}
            variables = [v for metric in updated.values() for v in metric.variables]
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.variables_initializer(variables))
                # Keras metrics in a graph: update_metrics built each metric's update ops; run them, then read.
                session.run([update for metric in updated.values() for update in metric.updates])
                values = {key: float(np.asarray(session.run(value)).reshape(-1)[0]) for key, value in results.items()}
                result[f"head/{name}"] = {"metric_keys": sorted(metrics), "metric_values": values,
                                          "prediction_keys": keys, "chosen_keys": chosen,
                                          "loss": float(session.run(loss)),
                                          "metric_types": sorted({type(m).__name__ for m in metrics.values()})}


def main(model_dir):
    result = {}
    for name, (estimator, labels) in canned(model_dir).items():
        estimator.train(input_fn(labels), steps=2)
        prediction = next(iter(estimator.predict(input_fn(labels))))
        metrics = estimator.evaluate(input_fn(labels), steps=1)
        result[name] = {"predictions": {key: described(value) for key, value in prediction.items()},
                        "metrics": {key: described(value)[0] for key, value in metrics.items()}}
    head_api(result)
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
