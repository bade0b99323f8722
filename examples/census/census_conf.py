"""The census income job: wide & deep on UCI Adult, declared as a conf.

Run:  elastimator run examples/census/census_conf.py:CensusConf
"""

import os

import tensorflow as tf

from elastimator import EstimatorSpec, ModeKeys
from elastimator.data import Column, FileReader

HERE = os.path.dirname(os.path.abspath(__file__))
CATEGORICAL = ("workclass", "education", "marital_status", "occupation", "relationship", "race", "gender",
               "native_country")


def _numeric(name, transform):
    return tf.feature_column.numeric_column(name, normalizer_fn=lambda x: transform(tf.cast(x, tf.float32)))


def _feature_columns():
    numeric = [
        _numeric("age", lambda x: x / 100.0),
        _numeric("fnlwgt", lambda x: tf.math.log1p(x) / 15.0),
        _numeric("educational_num", lambda x: x / 16.0),
        _numeric("capital_gain", lambda x: tf.math.log1p(x) / 12.0),
        _numeric("capital_loss", lambda x: tf.math.log1p(x) / 9.0),
        _numeric("hours_per_week", lambda x: x / 100.0),
    ]
    categorical = {name: tf.feature_column.categorical_column_with_hash_bucket(name, 100) for name in CATEGORICAL}
    crosses = [
        tf.feature_column.crossed_column(["education", "occupation"], 1000),
        tf.feature_column.crossed_column(["marital_status", "relationship"], 100),
    ]
    wide = list(categorical.values()) + crosses
    deep = numeric + [tf.feature_column.embedding_column(c, dimension=8) for c in categorical.values()]
    return wide, deep


def wide_and_deep_model_fn(features, labels, mode, params):
    """Wide (linear over categories and crosses) plus deep (MLP over embeddings and numbers)."""
    wide_columns, deep_columns = _feature_columns()
    wide_logit = tf.compat.v1.feature_column.linear_model(features, wide_columns, units=1)
    hidden = tf.compat.v1.feature_column.input_layer(features, deep_columns)
    for units in params["hidden_units"]:
        hidden = tf.compat.v1.layers.dense(hidden, units, activation=tf.nn.relu)
    logits = wide_logit + tf.compat.v1.layers.dense(hidden, 1)
    probability = tf.sigmoid(logits)
    predictions = {"logistic": probability, "class_ids": tf.cast(probability > 0.5, tf.int64)}
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    labels = tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    optimizer = tf.compat.v1.train.AdamOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    metrics = {
        "auc": tf.compat.v1.metrics.auc(labels, probability, num_thresholds=500),
        "accuracy": tf.compat.v1.metrics.accuracy(labels, predictions["class_ids"]),
        "precision": tf.compat.v1.metrics.precision(labels, predictions["class_ids"]),
        "recall": tf.compat.v1.metrics.recall(labels, predictions["class_ids"]),
    }
    return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op, eval_metric_ops=metrics)


COLUMNS = (
    Column.create("age", "int"),
    Column.create("workclass", "string"),
    Column.create("fnlwgt", "int"),
    Column.create("education", "string"),
    Column.create("educational_num", "int"),
    Column.create("marital_status", "string"),
    Column.create("occupation", "string"),
    Column.create("relationship", "string"),
    Column.create("race", "string"),
    Column.create("gender", "string"),
    Column.create("capital_gain", "float32"),
    Column.create("capital_loss", "float32"),
    Column.create("hours_per_week", "float32"),
    Column.create("native_country", "string"),
    Column.create("income_over_50k", "int", is_label=True),
)


class CensusConf:
    """UCI Adult income > 50K, wide & deep."""

    model_dir = os.environ.get("CENSUS_MODEL_DIR", os.path.join(os.getcwd(), "census_model"))
    classifier_class = wide_and_deep_model_fn
    params = {"hidden_units": [64, 32], "learning_rate": 0.003}
    batch_size = 256
    max_steps = 3000
    save_steps = 1000
    log_steps = 200
    tf_random_seed = 42
    train_set = {
        "reader": FileReader(os.path.join(HERE, "data", "adult_train.csv"), skip_header=True),
        "columns": COLUMNS,
        "epoch": None,
        "shuffle": True,
    }
    eval_set = {
        "reader": FileReader(os.path.join(HERE, "data", "adult_test.csv"), skip_header=True),
        "columns": COLUMNS,
        "batch_size": 1024,
    }
    exporter = {"type": "best", "exports_to_keep": 2}
