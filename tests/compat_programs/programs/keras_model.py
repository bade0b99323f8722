"""The "Create an Estimator from a Keras model" guide: tf.keras.estimator.model_to_estimator on a compiled
tf.keras model. Prints `RESULT {json}`."""
import json
import sys

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_iris


def main(model_dir):
    x, y = load_iris(return_X_y=True)
    x = ((x - x.mean(0)) / x.std(0)).astype("float32")
    tf.random.set_seed(1)
    model = tf.keras.models.Sequential([
        tf.keras.layers.Dense(16, activation="relu", input_shape=(4,)),
        tf.keras.layers.Dropout(0.2),
        tf.keras.layers.Dense(3),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer="adam", metrics=["accuracy"])
    estimator = tf.keras.estimator.model_to_estimator(keras_model=model, model_dir=model_dir)
    name = model.input_names[0]

    def input_fn(training):
        dataset = tf.data.Dataset.from_tensor_slices(({name: x}, y.astype("int64")))
        return (dataset.shuffle(150, seed=1).repeat() if training else dataset).batch(32)

    estimator.train(input_fn=lambda: input_fn(True), steps=500)
    result = estimator.evaluate(input_fn=lambda: input_fn(False))
    print("RESULT " + json.dumps({"accuracy": float(result["accuracy"]), "loss": float(result["loss"]),
                                  "global_step": int(result["global_step"])}))


if __name__ == "__main__":
    main(sys.argv[1])
