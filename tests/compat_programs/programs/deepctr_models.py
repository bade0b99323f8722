"""DeepCTR 0.9.4's 13 estimator models, as its docs run them (docs "Estimator with TFRecord input": feature
columns, `deepctr.estimator.inputs.input_fn_tfrecord`, `model.train`, `model.evaluate`, `model.predict`), on a
generated CTR-like table written as TFRecords: 8 id fields, 3 numbers, a click that depends on a few fields, a pair
of them and a number.
Every model in one process; prints `RESULT {json}` with each model's metrics, prediction keys and shapes, its
checkpoints and variables, and the LogLoss and AUC of its predictions.

The models' seed (DeepCTR's `seed` and RunConfig's `tf_random_seed`) is the record's run number
(COMPAT_PROGRAM_RUN, 0 unless record_reference.py sets it), so the recorded runs of 2.15 measure its spread over
seeds; the data are the same on every run.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

# DeepCTR checks PyPI for a newer release in a thread on import; a closed local port makes that fail at once
# instead of holding the process open where there is no network (on 2.15 as here).
os.environ.setdefault("https_proxy", "http://127.0.0.1:9")
os.environ.setdefault("HTTPS_PROXY", "http://127.0.0.1:9")

from deepctr.estimator import (AFMEstimator, AutoIntEstimator, CCPMEstimator, DCNEstimator,  # noqa: E402
                               DeepFEFMEstimator, DeepFMEstimator, FiBiNETEstimator, FNNEstimator, FwFMEstimator,
                               NFMEstimator, PNNEstimator, WDLEstimator, xDeepFMEstimator)
from deepctr.estimator.inputs import input_fn_tfrecord  # noqa: E402

MODELS = [AFMEstimator, AutoIntEstimator, CCPMEstimator, DCNEstimator, DeepFEFMEstimator, DeepFMEstimator,
          FiBiNETEstimator, FNNEstimator, FwFMEstimator, NFMEstimator, PNNEstimator, WDLEstimator, xDeepFMEstimator]
SPARSE = [f"C{i}" for i in range(1, 9)]
DENSE = ["I1", "I2", "I3"]
VOCABULARY = [12, 30, 7, 50, 20, 9, 40, 15]
TRAIN_ROWS, TEST_ROWS, BATCH = 2048, 512, 256


def generate(path, rows, rng):
    ids = np.stack([rng.randint(0, size, size=rows) for size in VOCABULARY], axis=1)
    numbers = rng.uniform(size=(rows, len(DENSE))).astype("float32")
    logit = (np.where(ids[:, 0] % 3 == 0, 1.2, -0.4) + np.where(ids[:, 1] < 10, 0.8, -0.6)
             + np.where((ids[:, 2] + ids[:, 3]) % 2 == 0, 0.7, -0.7) + 1.5 * numbers[:, 0] - 1.2)
    labels = (rng.uniform(size=rows) < 1 / (1 + np.exp(-logit))).astype("float32")
    with tf.io.TFRecordWriter(path) as writer:
        for row_ids, row_numbers, label in zip(ids, numbers, labels):
            feature = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
                       for name, value in zip(SPARSE, row_ids)}
            feature.update({name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                            for name, value in zip(DENSE, row_numbers)})
            feature["label"] = tf.train.Feature(float_list=tf.train.FloatList(value=[label]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return labels


def log_loss_and_auc(labels, probabilities):
    p = np.clip(probabilities, 1e-7, 1 - 1e-7)
    log_loss = float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))
    order = np.argsort(probabilities, kind="stable")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    positives = labels.sum()
    auc = float((ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * (len(labels) - positives)))
    return log_loss, auc


def main(model_dir):
    seed = int(os.environ.get("COMPAT_PROGRAM_RUN", "0"))
    os.makedirs(model_dir, exist_ok=True)
    rng = np.random.RandomState(0)
    train, test = os.path.join(model_dir, "train.tfrecords"), os.path.join(model_dir, "test.tfrecords")
    generate(train, TRAIN_ROWS, rng)
    test_labels = generate(test, TEST_ROWS, rng)
    feature_description = {k: tf.io.FixedLenFeature(dtype=tf.int64, shape=1) for k in SPARSE}
    feature_description.update({k: tf.io.FixedLenFeature(dtype=tf.float32, shape=1) for k in DENSE})
    feature_description["label"] = tf.io.FixedLenFeature(dtype=tf.float32, shape=1)
    dnn_feature_columns, linear_feature_columns = [], []
    for feat, size in zip(SPARSE, VOCABULARY):
        ids = tf.feature_column.categorical_column_with_identity(feat, size)
        dnn_feature_columns.append(tf.feature_column.embedding_column(ids, 4))
        linear_feature_columns.append(ids)
    for feat in DENSE:
        dnn_feature_columns.append(tf.feature_column.numeric_column(feat))
        linear_feature_columns.append(tf.feature_column.numeric_column(feat))
    results = {}
    for model_class in MODELS:
        name = model_class.__name__
        directory = os.path.join(model_dir, name)
        config = tf.estimator.RunConfig(tf_random_seed=seed)
        # PNN takes only the DNN's columns; every other model takes (linear, dnn).
        columns = (dnn_feature_columns,) if model_class is PNNEstimator else (linear_feature_columns,
                                                                                dnn_feature_columns)
        model = model_class(*columns, task="binary", seed=1024 + seed, model_dir=directory, config=config)
        model.train(input_fn_tfrecord(train, feature_description, "label", batch_size=BATCH, num_epochs=1,
                                      shuffle_factor=10))
        metrics = model.evaluate(input_fn_tfrecord(test, feature_description, "label", batch_size=BATCH,
                                                   num_epochs=1, shuffle_factor=0))
        predictions = list(model.predict(input_fn_tfrecord(test, feature_description, "label", batch_size=BATCH,
                                                           num_epochs=1, shuffle_factor=0)))
        probabilities = np.array([float(p["pred"][0]) for p in predictions])
        log_loss, auc = log_loss_and_auc(test_labels, probabilities)
        results[name] = {
            "metrics": {key: float(value) for key, value in metrics.items()},
            "prediction_keys": sorted(predictions[0]),
            "prediction_shapes": {key: [np.asarray(value).dtype.name, list(np.asarray(value).shape)]
                                  for key, value in predictions[0].items()},
            "predictions": len(predictions),
            "predicted_log_loss": log_loss,
            "predicted_auc": auc,
            "checkpoints": sorted(int(f.split("-")[1].split(".")[0]) for f in os.listdir(directory)
                                  if f.startswith("model.ckpt-") and f.endswith(".index")),
            "variables": {v: list(model.get_variable_value(v).shape) for v in model.get_variable_names()},
        }
    print("RESULT " + json.dumps({"seed": seed, "models": results}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
