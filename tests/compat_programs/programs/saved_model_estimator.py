"""SavedModelEstimator, imported from where tf.estimator 2.15 kept it, as its docstring shows it: a DNNClassifier
exported for every mode (supervised receivers for train and eval, a tf.Example parser for serving), then
evaluated, trained further and asked for predictions through the SavedModel alone. It also evaluates the
SavedModel tf.estimator 2.15 exported from this program (../saved_model_tf215), and says what a SavedModel
exported for serving only does when asked to train. Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow_estimator.python.estimator.canned.saved_model_estimator import SavedModelEstimator

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "saved_model_tf215")
COLOR = tf.feature_column.embedding_column(
    tf.feature_column.categorical_column_with_vocabulary_list("color", ("green", "yellow")), dimension=1)
SIZE = tf.feature_column.numeric_column("size", default_value=0.0)


def input_fn():
    features = {"color": tf.constant(["green", "green", "yellow", "yellow"]),
                "size": tf.constant([3.5, 4.2, 6.1, 1.0])}
    return tf.data.Dataset.from_tensors((features, tf.constant([1, 1, 1, 0], tf.int64))).repeat()


def predict_input_fn():
    example = tf.train.Example()
    example.features.feature["color"].bytes_list.value.extend([b"yellow"])
    example.features.feature["size"].float_list.value.extend([1.0])
    return {"inputs": tf.constant([example.SerializeToString()])}


def export(classifier, base):
    with tf.Graph().as_default():
        supervised = tf.estimator.experimental.build_raw_supervised_input_receiver_fn(
            {"color": tf.compat.v1.placeholder(tf.string, [None]),
             "size": tf.compat.v1.placeholder(tf.float32, [None])},
            tf.compat.v1.placeholder(tf.int64, [None]))
    serving = tf.estimator.export.build_parsing_serving_input_receiver_fn(
        tf.feature_column.make_parse_example_spec([COLOR, SIZE]))
    return classifier.experimental_export_all_saved_models(
        base, {tf.estimator.ModeKeys.TRAIN: supervised, tf.estimator.ModeKeys.EVAL: supervised,
               tf.estimator.ModeKeys.PREDICT: serving}).decode()


def rounded(metrics):
    return {key: round(float(value), 5) for key, value in metrics.items()}


def main(model_dir):
    classifier = tf.estimator.DNNClassifier([4], [COLOR, SIZE], model_dir=os.path.join(model_dir, "dnn"),
                                            config=tf.estimator.RunConfig(tf_random_seed=1))
    classifier.train(input_fn, steps=10)
    export_dir = export(classifier, os.path.join(model_dir, "export"))
    estimator = SavedModelEstimator(export_dir, os.path.join(model_dir, "from_saved_model"))
    before = estimator.evaluate(input_fn, steps=1)
    estimator.train(input_fn, steps=20)
    after = estimator.evaluate(input_fn, steps=1)
    prediction = next(estimator.predict(predict_input_fn))
    from_215 = SavedModelEstimator(FIXTURE, os.path.join(model_dir, "fixture"))
    fixture_before = from_215.evaluate(input_fn, steps=1)
    from_215.train(input_fn, steps=20)
    serving_only = classifier.export_saved_model(
        os.path.join(model_dir, "serving_only"),
        tf.estimator.export.build_parsing_serving_input_receiver_fn(
            tf.feature_column.make_parse_example_spec([COLOR, SIZE]))).decode()
    try:
        SavedModelEstimator(serving_only, os.path.join(model_dir, "serving")).train(input_fn, steps=1)
        serving_only_train = None
    except Exception as error:  # pylint: disable=broad-except
        serving_only_train = "RuntimeError" if isinstance(error, RuntimeError) else type(error).__name__
    result = {
        "metric_keys": sorted(before),
        "steps": [int(before["global_step"]), int(after["global_step"])],
        "loss_went_down": bool(after["loss"] < before["loss"]),
        "prediction": {key: [np.asarray(value).dtype.name, list(np.asarray(value).shape)]
                       for key, value in prediction.items()},
        "fixture_before": rounded(fixture_before),
        "fixture_after": rounded(from_215.evaluate(input_fn, steps=1)),
        "serving_only_train": serving_only_train,
    }
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
