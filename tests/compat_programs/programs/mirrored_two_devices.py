"""Two replicas in one process: RunConfig(train_distribute=MirroredStrategy over two logical CPUs,
eval_distribute=the same), a custom model_fn (a mean squared error, v1 gradient descent) and a canned
LinearRegressor (SGD), trained and evaluated on the same seeded batches. tf.estimator 2.15 hung in the first
step with MirroredStrategy's default cross-device ops over CPUs, so the strategy here names
ReductionToOneDevice, which both run. Prints `RESULT {json}`: each estimator's loss at every step (its
training summaries), its weights and its evaluation loss.
"""
import glob
import json
import os
import sys

import numpy as np
import tensorflow as tf

CPU = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(CPU, [tf.config.LogicalDeviceConfiguration()] * 2)

RNG = np.random.RandomState(0)
X = RNG.normal(size=(256, 3)).astype("float32")
Y = (X @ np.array([[1.5], [-2.0], [0.5]], "float32") + 0.3 + 0.1 * RNG.normal(size=(256, 1))).astype("float32")


def model_fn(features, labels, mode):
    weights = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
    bias = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
    predictions = tf.matmul(features["x"], weights) + bias
    loss = tf.compat.v1.losses.mean_squared_error(labels, predictions)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn(training):
    def make(input_context=None):
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return dataset.repeat().batch(8) if training else dataset.batch(32)
    return make


def losses(model_dir):
    found = []
    for path in sorted(glob.glob(os.path.join(model_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == "loss":
                    found.append([event.step, round(float(value.simple_value), 6)])
    return sorted(found)


def run(name, make_estimator, model_dir):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    config = tf.estimator.RunConfig(train_distribute=strategy, eval_distribute=strategy, save_summary_steps=1,
                                    log_step_count_steps=None, tf_random_seed=1)
    estimator = make_estimator(os.path.join(model_dir, name), config)
    estimator.train(input_fn(True), steps=12)
    evaluation = estimator.evaluate(input_fn(False), steps=4)
    weights = {n: estimator.get_variable_value(n).ravel().round(6).tolist()
               for n in estimator.get_variable_names() if "Ftrl" not in n and "SGD" not in n
               and n not in ("global_step",) and "iter" not in n}
    return {"losses": losses(os.path.join(model_dir, name)), "weights": weights,
            "eval_loss": round(float(evaluation["loss"]), 6), "replicas": strategy.num_replicas_in_sync}


def main(model_dir):
    columns = [tf.feature_column.numeric_column("x", shape=[3])]
    result = {
        "custom": run("custom", lambda d, c: tf.estimator.Estimator(model_fn, model_dir=d, config=c), model_dir),
        "linear": run("linear", lambda d, c: tf.estimator.LinearRegressor(
            columns, model_dir=d, config=c, optimizer="SGD"), model_dir),
    }
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
