"""A model_fn that builds one train op and returns another, as Neural Structured Learning's regularizers do (they
call the base model_fn in TRAIN mode and return `base_spec._replace(train_op=<their own minimize>)`): an Adam
minimize is built and dropped, an Adagrad minimize of twice the loss is returned, both stepping the global step,
and a momentum of the gradient kept by hand is updated by an assign nothing runs. tf.estimator 2.15 ran the
returned op only: the global step counts each step once, the dropped Adam's slots and beta powers and the hand-kept
momentum keep their initial values. Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
X = (rng.normal(size=(64, 3)) + 2.0).astype("float32")
Y = (X @ np.array([1.0, -2.0, 0.5], "float32")).reshape(-1, 1)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(16)


def model_fn(features, labels, mode):
    w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(features["x"] @ w - labels))
    momentum = tf.compat.v1.get_variable("momentum", [3, 1], initializer=tf.compat.v1.zeros_initializer(),
                                         trainable=False)
    tf.compat.v1.assign(momentum, 0.9 * momentum + tf.gradients(loss, w)[0])
    global_step = tf.compat.v1.train.get_global_step()
    with tf.compat.v1.variable_scope("dropped"):
        tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, global_step=global_step)
    with tf.compat.v1.variable_scope("returned"):
        train_op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(2 * loss, global_step=global_step)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(model_dir):
    estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir, config=tf.estimator.RunConfig(tf_random_seed=1))
    estimator.train(input_fn, steps=30)
    values = {name: np.asarray(estimator.get_variable_value(name)) for name in estimator.get_variable_names()}
    print("RESULT " + json.dumps({
        "variables": sorted(values),
        "global_step": int(values["global_step"]),
        "abs_sums": {name: round(float(np.abs(value).sum()), 5) for name, value in sorted(values.items())},
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
