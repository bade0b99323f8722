"""Canned estimators with the optimizers tf.estimator 2.15's TF2 canned estimators took: names, tf-keras
legacy optimizers with a learning-rate schedule, newer tf.keras optimizers, v1 optimizers, callables.
Prints `RESULT {json}`."""
import json
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
X = rng.normal(size=(512, 4)).astype("float32")
Y = (X @ np.array([1.0, -2.0, 0.5, 1.5], "float32") > 0).astype("int64")
COLUMNS = [tf.feature_column.numeric_column("x", shape=[4])]
OPTIMIZERS = {
    "name": lambda: "Adagrad",
    "legacy_ftrl_decay": lambda: tf.keras.optimizers.legacy.Ftrl(
        learning_rate=tf.keras.optimizers.schedules.ExponentialDecay(0.5, decay_steps=100, decay_rate=0.9)),
    "keras_adam": lambda: tf.keras.optimizers.Adam(learning_rate=0.05),
    "v1_momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.05, momentum=0.9),
    "callable": lambda: (lambda: tf.keras.optimizers.legacy.SGD(learning_rate=0.1)),
}


def input_fn(training):
    def fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return (dataset.shuffle(512, seed=1).repeat() if training else dataset).batch(64)
    return fn


def main(model_dir):
    results = {}
    for name, make in OPTIMIZERS.items():
        for kind in ("linear", "dnn"):
            if kind == "linear":
                estimator = tf.estimator.LinearClassifier(COLUMNS, model_dir=f"{model_dir}/{name}_{kind}",
                                                          optimizer=make())
            else:
                estimator = tf.estimator.DNNClassifier([8], COLUMNS, model_dir=f"{model_dir}/{name}_{kind}",
                                                       optimizer=make())
            try:
                estimator.train(input_fn(True), steps=200)
            except ValueError as e:  # tf.estimator 2.15 refused newer tf.keras optimizers in its graph
                results[f"{name}/{kind}"] = {"error": str(e)[:200]}
                continue
            metrics = estimator.evaluate(input_fn(False))
            results[f"{name}/{kind}"] = {"accuracy": float(metrics["accuracy"]),
                                         "global_step": int(metrics["global_step"])}
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
