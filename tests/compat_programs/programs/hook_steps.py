"""At which global steps tf.estimator's hooks act: TensorFlow's session-run hooks passed to `train(hooks=...)`,
RunConfig's checkpoints and summaries, checkpoint listeners, a NaN loss, a resumed training. Written from the
tf.estimator API reference, the way its users pass these hooks. Every training runs 50 steps or more, so
elastimator's default execution may run several steps per session call. Prints `RESULT {json}`.
"""
import glob
import json
import os
import sys

import numpy as np
import tensorflow as tf

X = np.random.RandomState(0).normal(size=(256, 3)).astype("float32")
Y = (X.sum(axis=1, keepdims=True) > 0).astype("float32")


def input_fn():
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat().batch(8)


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(features["x"], 1)
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    global_step = tf.compat.v1.train.get_global_step()
    if params.get("nan_at"):
        loss = tf.where(global_step >= params["nan_at"], tf.constant(np.nan), loss)
    tf.compat.v1.summary.scalar("model_loss", loss)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = []  # hooks that write files are made inside model_fn, in the training graph, as users make them
    if params.get("summary_hook_dir"):
        hooks.append(tf.estimator.SummarySaverHook(save_steps=6, output_dir=params["summary_hook_dir"],
                                                   summary_op=tf.compat.v1.summary.merge_all()))
    if params.get("step_counter_dir"):
        hooks.append(tf.estimator.StepCounterHook(every_n_steps=9, output_dir=params["step_counter_dir"]))
    if params.get("profile_dir"):
        hooks.append(tf.estimator.ProfilerHook(save_steps=8, output_dir=params["profile_dir"]))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=hooks)


def estimator(model_dir, params=None, **config):
    config.setdefault("log_step_count_steps", 1000)
    # The test's harness may add settings a 2.15 RunConfig lacks (elastimator's steps_per_execution).
    config.update(json.loads(os.environ.get("HOOK_STEPS_RUN_CONFIG", "{}")))
    return tf.estimator.Estimator(model_fn, model_dir=model_dir, params=params or {},
                                  config=tf.estimator.RunConfig(**config))


def checkpoint_steps(directory):
    """The steps of the checkpoints in `directory` (every one written, newest kept by max_to_keep)."""
    steps = {int(path.rsplit("-", 1)[1].split(".")[0]) for path in glob.glob(f"{directory}/model.ckpt-*.index")}
    return sorted(steps)


def event_steps(directory, tag):
    steps = []
    for path in sorted(glob.glob(f"{directory}/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            if any(value.tag == tag for value in event.summary.value):
                steps.append(int(event.step))
    return steps


class Listener(tf.estimator.CheckpointSaverListener):
    def __init__(self):
        self.steps = []

    def after_save(self, session, global_step_value):
        self.steps.append(int(global_step_value))


def main(root):
    result = {}

    e = estimator(f"{root}/stop_at_step")
    e.train(input_fn, hooks=[tf.estimator.StopAtStepHook(last_step=63)], steps=1000)
    result["stop_at_step_last_step_63"] = int(e.get_variable_value("global_step"))
    e.train(input_fn, hooks=[tf.estimator.StopAtStepHook(num_steps=57)], steps=1000)
    result["stop_at_step_num_steps_57_more"] = int(e.get_variable_value("global_step"))

    saver_dir = f"{root}/saver_hook_checkpoints"
    e = estimator(f"{root}/saver_hook", keep_checkpoint_max=100)
    e.train(input_fn, hooks=[tf.estimator.CheckpointSaverHook(saver_dir, save_steps=7)], steps=80)
    result["checkpoint_saver_hook_save_steps_7"] = checkpoint_steps(saver_dir)

    e = estimator(f"{root}/config_checkpoints", save_checkpoints_steps=10, keep_checkpoint_max=100)
    listener = Listener()
    e.train(input_fn, max_steps=65, saving_listeners=[listener])
    result["save_checkpoints_steps_10_max_steps_65"] = checkpoint_steps(e.model_dir)
    result["listener_after_save_steps"] = listener.steps
    listener = Listener()
    e.train(input_fn, steps=62, saving_listeners=[listener])  # resumes at 65
    result["resumed_at_65_steps_62"] = checkpoint_steps(e.model_dir)
    result["resumed_listener_after_save_steps"] = listener.steps

    e = estimator(f"{root}/config_summaries", save_summary_steps=10)
    e.train(input_fn, max_steps=65)
    result["save_summary_steps_10_max_steps_65"] = event_steps(e.model_dir, "model_loss")
    e.train(input_fn, max_steps=138)
    result["resumed_summaries_to_138"] = event_steps(e.model_dir, "model_loss")

    for name, key, tag in (("summary_saver_hook_save_steps_6", "summary_hook_dir", "model_loss"),
                           ("step_counter_hook_every_9", "step_counter_dir", "global_step/sec")):
        directory = f"{root}/{key}"
        e = estimator(f"{root}/{name}", params={key: directory}, save_summary_steps=None)
        e.train(input_fn, steps=70)
        result[name] = event_steps(directory, tag)
    e = estimator(f"{root}/profiler", params={"profile_dir": f"{root}/profiles"})
    e.train(input_fn, steps=70)
    result["profiler_hook_save_steps_8"] = sorted(int(os.path.basename(p)[len("timeline-"):-len(".json")])
                                                  for p in glob.glob(f"{root}/profiles/timeline-*.json"))

    logged = []
    e = estimator(f"{root}/logging")
    e.train(input_fn, steps=60, hooks=[tf.estimator.LoggingTensorHook(
        {"step": "global_step"}, every_n_iter=6, formatter=lambda values: logged.append(1) or "")])
    result["logging_tensor_hook_every_6_iter_calls"] = len(logged)

    e = estimator(f"{root}/nan", params={"nan_at": 53}, save_checkpoints_steps=5, keep_checkpoint_max=100)
    try:
        e.train(input_fn, steps=100)
        result["nan_loss"] = "no error"
    except tf.compat.v1.train.NanLossDuringTrainingError as error:
        result["nan_loss"] = {"caught_as": "NanLossDuringTrainingError", "is_runtime_error":
                              isinstance(error, RuntimeError), "checkpoints": checkpoint_steps(e.model_dir)}

    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
