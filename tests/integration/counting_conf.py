"""A job whose model only counts how many times it trained each record id (for the fault tests).

COUNT_DATA names a file of "id,label" lines; COUNT_RECORDS their number. With COUNT_EMBEDDING_ID_SCALE set, each
step also trains the rows of its ids in an embedding variable (keyed by id * scale, two partitions), so a test can
check that no id is lost. With COUNT_SYNC=1 the job trains synchronously (strategy 'multi_worker_mirrored'): the
trainers' counts are all-reduced into every copy of the variable; COUNT_REPLICAS=N then trains N replicas in each
process (logical CPU devices), each on a batch of its own. With COUNT_EVAL=1 the conf has an eval set (the same
file, 5 batches an evaluation), for a job with an evaluator.
"""

import os
import time

import tensorflow as tf

from elastimator import Column, EstimatorSpec, FileReader, ModeKeys
from elastimator import embedding

RECORDS = int(os.environ["COUNT_RECORDS"])
STEP_SECS = float(os.environ.get("COUNT_STEP_SECS", "0.02"))
SYNC = os.environ.get("COUNT_SYNC") == "1"


def _train_embedding(ids, scale: int) -> tf.Operation:
    table = embedding.get_embedding_variable("ids", 2, partitioner=tf.compat.v1.fixed_size_partitioner(2))
    rows = tf.nn.embedding_lookup(table, tf.cast(ids, tf.int64) * scale)
    return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(rows - 1.0)))


def counting_model_fn(features, labels, mode):
    ids = features["id"]
    counts = tf.compat.v1.get_variable("counts", [RECORDS], tf.float32, tf.compat.v1.zeros_initializer(),
                                       trainable=False, aggregation=tf.VariableAggregation.SUM)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"count": tf.gather(counts, ids)})
    # A little work per step, so a process can be killed while training is under way.
    pause = tf.py_function(lambda: time.sleep(STEP_SECS) or 0.0, [], tf.float32)
    with tf.control_dependencies([pause]):
        if SYNC:  # a dense update, which the strategy sums over the replicas (it drops all but one's scatter)
            seen = counts.assign_add(tf.math.unsorted_segment_sum(tf.ones_like(ids, tf.float32), ids, RECORDS))
        else:
            seen = tf.compat.v1.scatter_add(counts, ids, tf.ones_like(ids, tf.float32))
    scale = os.environ.get("COUNT_EMBEDDING_ID_SCALE")
    updates = [seen, _train_embedding(ids, int(scale))] if scale else [seen]
    with tf.control_dependencies(updates):
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
    if os.environ.get("COUNT_EVAL") == "1":
        eval_set = {"reader": FileReader(os.environ["COUNT_DATA"]),
                    "columns": (Column.create("id", "int"), Column.create("label", "float32", is_label=True)),
                    "batch_size": 10, "epoch": 1}
        eval_steps = 5
    strategy = "multi_worker_mirrored" if SYNC else "parameter_server"
    replicas_per_worker = int(os.environ["COUNT_REPLICAS"]) if os.environ.get("COUNT_REPLICAS") else None
