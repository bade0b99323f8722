"""The TensorFlow "Premade Estimators" tutorial: a DNNClassifier on iris, from a CSV through tf.data.

Runs on tf.estimator 2.15 as it is, and on elastimator under `python -m elastimator.compat`.
Prints one line `RESULT {json}`.
"""
import json
import sys

import numpy as np
import pandas as pd
import tensorflow as tf
from sklearn.datasets import load_iris

CSV_COLUMN_NAMES = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth", "Species"]


def load(model_dir):
    x, y = load_iris(return_X_y=True)
    order = np.random.RandomState(0).permutation(len(y))
    frame = pd.DataFrame(x[order], columns=CSV_COLUMN_NAMES[:4]).astype("float32")
    frame["Species"] = y[order]
    train, test = frame.iloc[:120], frame.iloc[120:]
    train.to_csv(f"{model_dir}_train.csv", index=False)
    test.to_csv(f"{model_dir}_test.csv", index=False)
    train = pd.read_csv(f"{model_dir}_train.csv")
    test = pd.read_csv(f"{model_dir}_test.csv")
    return (train, train.pop("Species")), (test, test.pop("Species"))


def input_fn(features, labels, training=True, batch_size=32):
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    if training:
        dataset = dataset.shuffle(1000, seed=1).repeat()
    return dataset.batch(batch_size)


def main(model_dir):
    (train_x, train_y), (test_x, test_y) = load(model_dir)
    feature_columns = [tf.feature_column.numeric_column(key=key) for key in train_x.keys()]
    classifier = tf.estimator.DNNClassifier(
        feature_columns=feature_columns, hidden_units=[30, 10], n_classes=3, model_dir=model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=1))
    classifier.train(input_fn=lambda: input_fn(train_x, train_y, training=True), steps=1000)
    result = classifier.evaluate(input_fn=lambda: input_fn(test_x, test_y, training=False))
    expected = ["Setosa", "Versicolor", "Virginica"]
    predict_x = {"SepalLength": [5.1, 5.9, 6.9], "SepalWidth": [3.3, 3.0, 3.1],
                 "PetalLength": [1.7, 4.2, 5.4], "PetalWidth": [0.5, 1.5, 2.1]}
    predictions = classifier.predict(
        input_fn=lambda: tf.data.Dataset.from_tensor_slices(dict(predict_x)).batch(3))
    classes = [expected[int(p["class_ids"][0])] for p in predictions]
    print("RESULT " + json.dumps({"accuracy": float(result["accuracy"]), "loss": float(result["average_loss"]),
                                  "global_step": int(result["global_step"]), "predicted": classes,
                                  "result_types": sorted({type(v).__module__ for v in result.values()})}))


if __name__ == "__main__":
    main(sys.argv[1])
