"""A tiny iris job for the CLI tests; the data directory comes from TINY_DATA."""

import os

import tensorflow as tf

from elastimator import Column, FileReader
from tests.helpers import linear_model_fn

DATA = os.environ["TINY_DATA"]
COLUMNS = [Column.create(name, "float32") for name in ("a", "b", "c", "d")] + [
    Column.create("species", "int", is_label=True)]


def iris_model_fn(features, labels, mode, params):
    stacked = tf.stack([features[name] for name in ("a", "b", "c", "d")], axis=1)
    return linear_model_fn({"x": stacked}, labels, mode, params)


class TinyConf:
    classifier_class = iris_model_fn
    params = {"n_classes": 3}
    model_dir = os.path.join(DATA, "model")
    max_steps = 150
    tf_random_seed = 7  # the accuracy the tests read back is the same on every run
    save_steps = 75
    log_steps = 50
    batch_size = 16
    train_set = {"reader": FileReader(os.path.join(DATA, "train.csv"), skip_header=True), "columns": COLUMNS,
                 "epoch": None, "shuffle": True, "max_bad_records": int(os.environ.get("TINY_MAX_BAD", "0"))}
    eval_set = {"reader": FileReader(os.path.join(DATA, "train.csv"), skip_header=True), "columns": COLUMNS,
                "max_bad_records": int(os.environ.get("TINY_MAX_BAD", "0"))}
    exporter = "latest"
