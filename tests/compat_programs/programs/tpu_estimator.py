"""A TPUEstimator program run on CPU (`use_tpu=False`), written the way BERT-era research code wrote it: params'
batch_size per mode, TPUEstimatorSpec with eval_metrics=(metric_fn, tensors), a scaffold_fn, a host_call writing
summaries, TPUConfig(iterations_per_loop). Trains, evaluates, predicts and exports. Prints `RESULT {json}`.
"""
import glob
import json
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

rng = np.random.RandomState(0)
X = rng.normal(size=(256, 4)).astype("float32")
Y = (X @ np.array([1.0, -1.0, 0.5, 2.0], "float32") > 0).astype("int32")
SEEN = {"input_fn": {}, "model_fn": {}}


def input_fn(params, mode):
    SEEN["input_fn"][mode] = {"batch_size": params["batch_size"], "keys": sorted(k for k in params if k != "context")}
    dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
    if mode == tf.estimator.ModeKeys.TRAIN:
        dataset = dataset.repeat()
    return dataset.batch(params["batch_size"], drop_remainder=mode != tf.estimator.ModeKeys.PREDICT)


def make_input_fn(mode):
    return lambda params: input_fn(params, mode)


def metric_fn(labels, logits):
    return {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, axis=1)),
            "mean_logit": tf.compat.v1.metrics.mean(logits)}


def model_fn(features, labels, mode, params):
    key = mode if mode not in SEEN["model_fn"] else f"{mode} (export)"  # export calls it again in PREDICT
    SEEN["model_fn"][key] = {"batch_size": params.get("batch_size"), "learning_rate": params["learning_rate"],
                             "keys": sorted(k for k in params if k != "context")}
    logits = tf.compat.v1.layers.dense(features["x"], 2, name="logits")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
            mode, predictions={"class": tf.argmax(logits, axis=1), "logits": logits})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.compat.v1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"])
    if params["use_tpu"]:
        optimizer = tf.compat.v1.tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, global_step=global_step)

    def host_call_fn(step, host_loss):
        with tf.compat.v2.summary.create_file_writer(os.path.join(params["model_dir"], "host_call")).as_default():
            with tf.compat.v2.summary.record_if(True):
                tf.compat.v2.summary.scalar("host_loss", host_loss[0], step=step[0])
                return tf.compat.v1.summary.all_v2_summary_ops()

    scaffolded = []

    def scaffold_fn():
        scaffolded.append(True)
        return tf.compat.v1.train.Scaffold()

    spec = tf.compat.v1.estimator.tpu.TPUEstimatorSpec(
        mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn,
        host_call=(host_call_fn, [tf.reshape(global_step, [1]), tf.reshape(loss, [1])]))
    SEEN["scaffold_fn_called"] = bool(scaffolded) or "later"
    return spec


def main(model_dir):
    config = tf.compat.v1.estimator.tpu.RunConfig(
        master=None, model_dir=model_dir, save_checkpoints_steps=50,
        tpu_config=tf.compat.v1.estimator.tpu.TPUConfig(iterations_per_loop=10, num_shards=8))
    estimator = tf.compat.v1.estimator.tpu.TPUEstimator(
        model_fn=model_fn, config=config, use_tpu=False, train_batch_size=32, eval_batch_size=16,
        predict_batch_size=8, params={"learning_rate": 0.5, "model_dir": model_dir})
    estimator.train(make_input_fn(tf.estimator.ModeKeys.TRAIN), max_steps=120)
    metrics = estimator.evaluate(make_input_fn(tf.estimator.ModeKeys.EVAL), steps=4)
    predictions = list(estimator.predict(make_input_fn(tf.estimator.ModeKeys.PREDICT)))
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.constant(X[:1])})
    export = estimator.export_saved_model(os.path.join(model_dir, "export"), receiver).decode()
    host_steps = []
    for path in glob.glob(os.path.join(model_dir, "host_call", "events*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            if any(value.tag == "host_loss" for value in event.summary.value):
                host_steps.append(int(event.step))
    result = {
        "seen": SEEN, "global_step": int(estimator.get_variable_value("global_step")),
        "metrics": {key: float(value) for key, value in metrics.items()},
        "predictions": {"count": len(predictions), "keys": sorted(predictions[0]),
                        "class_dtype": np.asarray(predictions[0]["class"]).dtype.name},
        "export_tags": sorted(sorted(meta.meta_info_def.tags) for meta in saved_model_pb2.SavedModel.FromString(
            tf.io.gfile.GFile(os.path.join(export, "saved_model.pb"), "rb").read()).meta_graphs),
        "host_call_steps": {"count": len(host_steps), "first": min(host_steps, default=None),
                            "last": max(host_steps, default=None)},
        "checkpoints": sorted(int(p.rsplit("-", 1)[1].split(".")[0])
                              for p in glob.glob(os.path.join(model_dir, "model.ckpt-*.index"))),
    }
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
