"""What tf.estimator raises for common mistakes, as a program would catch it: for each, the exception's class and
the built-in (and TensorFlow) classes it is an instance of. Written from the tf.estimator API reference.
Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf

X = np.random.RandomState(0).normal(size=(32, 3)).astype("float32")
Y = (X.sum(axis=1) > 0).astype("int64").reshape(-1, 1)
CATCHABLE = (ValueError, TypeError, RuntimeError, KeyError, AttributeError, NotImplementedError, LookupError,
             tf.errors.OpError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError,
             tf.compat.v1.train.NanLossDuringTrainingError)


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(8)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    if params.get("spec") == "no_train_op":
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    if params.get("spec") == "not_a_spec":
        return {"loss": loss}
    if params.get("spec") == "vector_loss":
        return tf.estimator.EstimatorSpec(mode, loss=tf.fill([3], loss), train_op=tf.no_op())
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops=params.get("metrics", lambda: None)())


def estimator(root, name, **params):
    return tf.estimator.Estimator(model_fn, model_dir=f"{root}/{name}", params=params)


def cases(root):
    trained = estimator(root, "trained")
    trained.train(input_fn, steps=2)
    return {
        "model_fn_returns_a_dict": lambda: estimator(root, "a", spec="not_a_spec").train(input_fn, steps=1),
        "train_spec_without_train_op": lambda: estimator(root, "b", spec="no_train_op").train(input_fn, steps=1),
        "loss_of_shape_3": lambda: estimator(root, "c", spec="vector_loss").train(input_fn, steps=1),
        "metric_not_a_pair": lambda: estimator(root, "d", metrics=lambda: {"m": 1.0}).evaluate(input_fn, steps=1)
        if trained else None,
        "train_steps_0": lambda: trained.train(input_fn, steps=0),
        "train_steps_and_max_steps": lambda: trained.train(input_fn, steps=1, max_steps=5),
        "train_hook_not_a_hook": lambda: trained.train(input_fn, steps=1, hooks=[object()]),
        "evaluate_steps_0": lambda: trained.evaluate(input_fn, steps=0),
        "predict_unknown_key": lambda: next(trained.predict(input_fn, predict_keys=["nope"])),
        "variable_not_in_checkpoint": lambda: trained.get_variable_value("nope"),
        "model_fn_without_features": lambda: tf.estimator.Estimator(lambda labels, mode: None),
        "model_fn_not_callable": lambda: tf.estimator.Estimator("model_fn"),
        "run_config_steps_and_secs": lambda: tf.estimator.RunConfig(save_checkpoints_steps=1, save_checkpoints_secs=1),
        "run_config_unknown_argument": lambda: tf.estimator.RunConfig(save_steps=1),
        "run_config_negative_keep_max": lambda: tf.estimator.RunConfig(keep_checkpoint_max=-1),
        "config_not_a_run_config": lambda: tf.estimator.Estimator(model_fn, config={"model_dir": root}),
        "train_spec_max_steps_0": lambda: tf.estimator.TrainSpec(input_fn, max_steps=0),
        "eval_spec_steps_0": lambda: tf.estimator.EvalSpec(input_fn, steps=0),
        "eval_spec_exporter_not_an_exporter": lambda: tf.estimator.EvalSpec(input_fn, exporters=["x"]),
        "train_and_evaluate_not_an_estimator": lambda: tf.estimator.train_and_evaluate(
            "estimator", tf.estimator.TrainSpec(input_fn), tf.estimator.EvalSpec(input_fn)),
        "spec_unknown_mode": lambda: tf.estimator.EstimatorSpec("training", loss=tf.constant(1.0)),
        "head_n_classes_2_for_multi_class": lambda: tf.estimator.MultiClassHead(2),
        "warm_start_without_checkpoint": lambda: tf.estimator.WarmStartSettings(None),
        "serving_receiver_without_tensors": lambda: tf.estimator.export.ServingInputReceiver({}, {}),
    }


def main(root):
    result = {}
    for name, call in cases(root).items():
        with tf.Graph().as_default():
            try:
                call()
                result[name] = None
            except Exception as error:  # pylint: disable=broad-except
                result[name] = sorted(kind.__name__ for kind in CATCHABLE if isinstance(error, kind))
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
