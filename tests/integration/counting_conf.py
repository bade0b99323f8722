"""A job whose model only counts how many times it trained each record id (for the fault tests).

COUNT_DATA names a file of "id,label" lines; COUNT_RECORDS their number.
"""

import os
import time

import tensorflow as tf

from elastimator import Column, EstimatorSpec, FileReader, ModeKeys

RECORDS = int(os.environ["COUNT_RECORDS"])
STEP_SECS = float(os.environ.get("COUNT_STEP_SECS", "0.02"))


def counting_model_fn(features, labels, mode):
    ids = features["id"]
    counts = tf.compat.v1.get_variable("counts", [RECORDS], tf.float32, tf.compat.v1.zeros_initializer(),
                                       trainable=False)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"count": tf.gather(counts, ids)})
    # A little work per step, so a process can be killed while training is under way.
    pause = tf.py_function(lambda: time.sleep(STEP_SECS) or 0.0, [], tf.float32)
    with tf.control_dependencies([pause]):
        seen = tf.compat.v1.scatter_add(counts, ids, tf.ones_like(ids, tf.float32))
    with tf.control_dependencies([seen]):
        train_op = tf.compat.v1.assign_add(tf.compat.v1.train.get_global_step(), 1)
    loss = tf.reduce_mean(tf.cast(labels, tf.float32))
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


class CountingConf:
    classifier_class = counting_model_fn
    model_dir = os.environ["COUNT_MODEL_DIR"]
    save_steps = 40
    log_steps = 50
    keep_checkpoint_max = 3
    train_set = {
        "reader": FileReader(os.environ["COUNT_DATA"]),
        "columns": (Column.create("id", "int"), Column.create("label", "float32", is_label=True)),
        "batch_size": 10, "shard_size": 50, "epoch": 2,
    }
