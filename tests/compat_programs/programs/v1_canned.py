"""tf.compat.v1.estimator canned estimators, as TF 1 programs wrote them: numpy_input_fn, a v1
DNNClassifier and LinearRegressor (losses summed over the batch). Prints `RESULT {json}`."""
import json
import sys

import numpy as np
import tensorflow as tf


def main(model_dir):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(640, 3)).astype("float32")
    y_class = (x.sum(1) > 0).astype("int32")
    y_value = (x @ np.array([2.0, -1.0, 0.5], "float32") + 0.3).astype("float32")
    columns = [tf.feature_column.numeric_column("x", shape=[3])]
    inputs = tf.compat.v1.estimator.inputs
    classifier = tf.compat.v1.estimator.DNNClassifier(
        hidden_units=[8], feature_columns=columns, model_dir=f"{model_dir}/dnn",
        config=tf.compat.v1.estimator.RunConfig(tf_random_seed=1))
    classifier.train(inputs.numpy_input_fn({"x": x}, y_class, batch_size=32, num_epochs=None, shuffle=True),
                     steps=300)
    classified = classifier.evaluate(inputs.numpy_input_fn({"x": x}, y_class, batch_size=32, shuffle=False))
    regressor = tf.compat.v1.estimator.LinearRegressor(columns, model_dir=f"{model_dir}/linear")
    regressor.train(inputs.numpy_input_fn({"x": x}, y_value, batch_size=32, num_epochs=None, shuffle=True),
                    steps=300)
    regressed = regressor.evaluate(inputs.numpy_input_fn({"x": x}, y_value, batch_size=32, shuffle=False))
    print("RESULT " + json.dumps({
        "dnn_accuracy": float(classified["accuracy"]),
        # v1 heads report the summed batch loss as "loss": about batch size x the mean loss.
        "dnn_loss_over_average_loss": float(classified["loss"] / classified["average_loss"]),
        "linear_average_loss": float(regressed["average_loss"]),
        "linear_loss_over_average_loss": float(regressed["loss"] / regressed["average_loss"]),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
