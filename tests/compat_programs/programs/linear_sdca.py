"""Linear models trained by tf.estimator.experimental.LinearSDCA, as its API reference shows it: a binary
LinearClassifier and a LinearRegressor (with L1) over numeric, bucketized, categorical and crossed columns, an
example id feature and a weight column. The data come in one fixed order (no shuffle), so SDCA's steps are
deterministic. Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
N = 512
X = rng.normal(size=(N, 2)).astype("float32")
AGE = rng.uniform(18, 80, size=(N, 1)).astype("float32")
COLORS = np.array(["red", "green", "blue", "black"])
COLOR = COLORS[rng.randint(0, 4, size=N)]
SHAPE = np.array(["round", "square"])[rng.randint(0, 2, size=N)]
WEIGHT = rng.uniform(0.5, 1.5, size=(N, 1)).astype("float32")
SCORE = 1.5 * X[:, 0] - X[:, 1] + (COLOR == "red") * 1.0 - (AGE[:, 0] > 50) * 0.8
CLICK = (SCORE + 0.3 * rng.normal(size=N) > 0).astype("int64").reshape(-1, 1)
PRICE = (SCORE + 0.1 * rng.normal(size=N)).astype("float32").reshape(-1, 1)

color = tf.feature_column.categorical_column_with_vocabulary_list("color", list(COLORS))
shape = tf.feature_column.categorical_column_with_vocabulary_list("shape", ["round", "square"])
COLUMNS = [
    tf.feature_column.numeric_column("x", shape=[2]),
    tf.feature_column.bucketized_column(tf.feature_column.numeric_column("age"), [30.0, 50.0, 65.0]),
    color,
    tf.feature_column.crossed_column([color, shape], hash_bucket_size=16),
]


def input_fn(label, training):
    def fn():
        features = {"example_id": tf.constant([str(i) for i in range(N)]), "x": X, "age": AGE, "color": COLOR,
                    "shape": SHAPE, "weight": WEIGHT}
        dataset = tf.data.Dataset.from_tensor_slices((features, label))
        return (dataset.repeat() if training else dataset).batch(64)
    return fn


def describe(estimator, label, steps):
    estimator.train(input_fn(label, True), steps=steps)
    metrics = estimator.evaluate(input_fn(label, False))
    predictions = list(estimator.predict(input_fn(label, False)))
    first = predictions[0]
    return {
        "metrics": {key: float(value) for key, value in metrics.items()},
        "predictions": {key: [np.asarray(value).dtype.name, list(np.asarray(value).shape)]
                        for key, value in first.items()},
        "logits": [float(p["logits" if "logits" in p else "predictions"][0]) for p in predictions[:8]],
        "variables": sorted(estimator.get_variable_names()),
        "bias": float(np.asarray(estimator.get_variable_value("linear/linear_model/bias_weights")).reshape(-1)[0]),
        "color_weights": np.asarray(
            estimator.get_variable_value("linear/linear_model/color/weights")).reshape(-1).round(4).tolist(),
    }


def main(model_dir):
    optimizer = tf.estimator.experimental.LinearSDCA(example_id_column="example_id",
                                                     symmetric_l2_regularization=0.5)
    classifier = tf.estimator.LinearClassifier(COLUMNS, model_dir=model_dir + "/classifier", weight_column="weight",
                                               optimizer=optimizer)
    result = {"classifier": describe(classifier, CLICK, 40)}
    optimizer = tf.estimator.experimental.LinearSDCA(example_id_column="example_id", symmetric_l1_regularization=0.1,
                                                     symmetric_l2_regularization=1.0)
    regressor = tf.estimator.LinearRegressor(COLUMNS, model_dir=model_dir + "/regressor", optimizer=optimizer)
    result["regressor_l1"] = describe(regressor, PRICE, 40)
    errors = {}
    for name, make in {
        "multi_class": lambda: tf.estimator.LinearClassifier(COLUMNS, n_classes=3, optimizer=optimizer),
        "mean_combiner": lambda: tf.estimator.LinearClassifier(COLUMNS, optimizer=optimizer, sparse_combiner="mean"),
    }.items():
        try:
            make().train(input_fn(CLICK, True), steps=1)
            errors[name] = None
        except Exception as error:  # pylint: disable=broad-except
            errors[name] = "ValueError" if isinstance(error, ValueError) else type(error).__name__
    result["errors"] = errors
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
