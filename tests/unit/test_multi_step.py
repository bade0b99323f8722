"""RunConfig(steps_per_execution=N): N training steps per session call, hooks at the call boundaries."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

import elastimator as est

BATCHES = 23  # 23 batches of 4 records: a number no call size here divides


def _batches(repeat: bool = False):
    """Batch b holds the records 4b..4b+3; x is the record number."""
    def input_fn():
        x = np.arange(BATCHES * 4, dtype=np.float32)
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, (x % 2).astype(np.float32))).batch(4)
        return dataset.repeat() if repeat else dataset
    return input_fn


def _counting_model_fn(features, labels, mode):
    """A regression whose first variable is made from a tensor (tf.Variable(tensor)), plus two counters of what it
    trained on: the records (their numbers summed) and the batches."""
    weight = tf.Variable(tf.fill([1, 1], 0.5), name="weight")
    seen = tf.Variable(0.0, trainable=False, name="records_seen")
    batches = tf.Variable(0, trainable=False, name="batches_seen")
    x = features["x"][:, None]
    loss = tf.reduce_mean(tf.square(tf.matmul(x / 100.0, weight) - labels[:, None]))
    tf.compat.v1.add_to_collection("last_batch_sum", tf.reduce_sum(features["x"]))
    minimize = tf.compat.v1.train.AdamOptimizer(0.01).minimize(loss, tf.compat.v1.train.get_global_step())
    train_op = tf.group(minimize, seen.assign_add(tf.reduce_sum(features["x"])), batches.assign_add(1))
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _estimator(tmp_path, name, **config):
    config = {"tf_random_seed": 1, "log_step_count_steps": None, "save_summary_steps": None, **config}
    return est.Estimator(_counting_model_fn, model_dir=str(tmp_path / name), config=est.RunConfig(**config))


class _LastBatchSums(tf.compat.v1.train.SessionRunHook):
    """Records, per session call, a tensor of the model's step (the batch's sum of record numbers)."""

    def begin(self):
        self.sums = []
        self._tensor = tf.compat.v1.get_collection("last_batch_sum")[0]

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._tensor)

    def after_run(self, run_context, run_values):
        self.sums.append(float(run_values.results))


def _batch_sum(b: int) -> float:
    return float(sum(range(4 * b, 4 * b + 4)))


def test_several_steps_per_call_train_what_one_step_per_call_trains(tmp_path):
    one = _estimator(tmp_path, "one").train(_batches(), max_steps=17)
    seven = _estimator(tmp_path, "seven", steps_per_execution=7).train(_batches(), max_steps=17)
    assert seven.get_variable_value("global_step") == one.get_variable_value("global_step") == 17
    assert seven.get_variable_value("batches_seen") == 17
    assert seven.get_variable_value("records_seen") == sum(range(17 * 4))  # each record once, in order
    for name in ("weight", "weight/Adam", "weight/Adam_1"):
        np.testing.assert_allclose(seven.get_variable_value(name), one.get_variable_value(name), rtol=1e-6)


def test_hooks_run_once_per_call_and_see_its_last_step(tmp_path):
    hook = _LastBatchSums()
    _estimator(tmp_path, "m", steps_per_execution=5).train(_batches(), max_steps=12, hooks=[hook])
    # Calls of 5, 5 and 2 steps (the last stops at max_steps): the hook sees batches 4, 9 and 11.
    assert hook.sums == [_batch_sum(4), _batch_sum(9), _batch_sum(11)]


def test_input_that_ends_inside_a_call_keeps_the_steps_it_ran(tmp_path):
    estimator = _estimator(tmp_path, "m", steps_per_execution=10)
    estimator.train(_batches())
    assert estimator.get_variable_value("global_step") == BATCHES
    assert estimator.get_variable_value("records_seen") == sum(range(BATCHES * 4))
    assert tf.train.latest_checkpoint(estimator.model_dir).endswith(f"model.ckpt-{BATCHES}")


def test_steps_counts_from_the_restored_step(tmp_path):
    estimator = _estimator(tmp_path, "m", steps_per_execution=4)
    estimator.train(_batches(repeat=True), steps=6)
    estimator.train(_batches(repeat=True), steps=9)
    assert estimator.get_variable_value("global_step") == 15


def test_checkpoints_summaries_and_logs_land_on_their_intervals(tmp_path, caplog):
    estimator = _estimator(tmp_path, "m", steps_per_execution=8, save_checkpoints_steps=10, save_summary_steps=10,
                           log_step_count_steps=10)
    with caplog.at_level("INFO", logger="elastimator"):
        estimator.train(_batches(repeat=True), max_steps=45)
    saved = sorted(int(p.rsplit("-", 1)[1].split(".")[0]) for p in glob.glob(os.path.join(estimator.model_dir,
                                                                                         "model.ckpt-*.index")))
    assert saved == [10, 20, 30, 40, 45]  # and 0, which keep_checkpoint_max=5 deleted
    events = event_accumulator.EventAccumulator(estimator.model_dir)
    events.Reload()
    loss_steps = [s.step for s in events.Scalars("loss")]
    # As tf.estimator 2.15 wrote them: the first step's, then every 10 steps after it (hook_steps plans a call
    # of one step for each).
    assert loss_steps == [1, 11, 21, 31, 41]
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    # The step each loss was computed at (2.15's LoggingTensorHook showed the global step before the update), every
    # 10 steps from the first.
    assert [m.split(":")[0] for m in logged] == ["step 0", "step 10", "step 20", "step 30", "step 40"]


def test_an_early_stop_hook_stops_at_a_call_boundary(tmp_path):
    class StopAfter(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            self._step = tf.compat.v1.train.get_global_step()

        def before_run(self, run_context):
            return tf.compat.v1.train.SessionRunArgs(self._step)

        def after_run(self, run_context, run_values):
            if run_values.results >= 6:
                run_context.request_stop()

    estimator = _estimator(tmp_path, "m", steps_per_execution=4)
    estimator.train(_batches(repeat=True), hooks=[StopAfter()])
    step = estimator.get_variable_value("global_step")
    assert step in (8, 12)  # the hook reads the step during a call: before or after that call's steps
    assert estimator.get_variable_value("batches_seen") == step


def test_a_nan_loss_in_a_call_stops_training_and_keeps_the_last_good_checkpoint(tmp_path):
    def model_fn(features, labels, mode):
        weight = tf.compat.v1.get_variable("w", [1], initializer=tf.compat.v1.ones_initializer())
        step = tf.compat.v1.train.get_global_step()
        poison = tf.where(step >= 6, np.nan, 0.0)  # from step 6 on, the loss is NaN
        loss = tf.reduce_mean(features["x"]) * 0.0 + tf.reduce_sum(weight) + poison
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path / "m"), config=est.RunConfig(
        steps_per_execution=4, save_checkpoints_steps=4, log_step_count_steps=None, save_summary_steps=None))
    with pytest.raises(est.NanLossError, match="last good checkpoint, .*model.ckpt-4, is intact"):
        estimator.train(_batches(repeat=True), max_steps=20)


def test_steps_per_execution_is_validated():
    for bad in (0, -2, True, 2.0, "4"):
        with pytest.raises(est.ConfigError, match="steps_per_execution must be an int >= 1"):
            est.RunConfig(steps_per_execution=bad)


def test_a_step_with_tf1_control_flow_is_refused_with_the_fix(tmp_path):
    def model_fn(features, labels, mode):
        tf.compat.v1.disable_control_flow_v2()
        try:
            weight = tf.compat.v1.get_variable("w", [1])
            x = tf.compat.v1.cond(tf.reduce_sum(features["x"]) > 0, lambda: weight * 2.0, lambda: weight)
        finally:
            tf.compat.v1.enable_control_flow_v2()
        loss = tf.reduce_sum(x)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path / "m"), config=est.RunConfig(steps_per_execution=3))
    with pytest.raises(est.ConfigError, match=r"TF1 control flow .*steps_per_execution=1"):
        estimator.train(_batches(), max_steps=3)
    assert tf.compat.v1.control_flow_v2_enabled()


def test_the_loop_runs_each_copied_op_on_the_device_of_the_op_it_copies(tmp_path):
    """GPU-ready: a model placed on a device (here the second of two CPUs, standing in for a GPU) trains its looped
    steps there too, v1 Adam's fused updates included, so a call's steps make no round trip to the host."""
    placed = "/device:CPU:1"
    estimator = _estimator(tmp_path, "placed", steps_per_execution=5, save_checkpoints_steps=10,
                           session_config=tf.compat.v1.ConfigProto(device_count={"CPU": 2}),
                           device_fn=lambda op: placed)
    estimator.train(_batches(), max_steps=10)
    assert estimator.get_variable_value("batches_seen") == 10
    meta = tf.compat.v1.MetaGraphDef()
    with open(os.path.join(estimator.model_dir, "model.ckpt-10.meta"), "rb") as f:
        meta.ParseFromString(f.read())
    nodes = {node.name: node for node in meta.graph_def.node}
    scope = "steps_per_execution/step/"
    copies = {name: node for name, node in nodes.items()  # (the loop's input comes from the host, as each step's)
              if name.startswith(scope) and name[len(scope):] in nodes and nodes[name[len(scope):]].device == placed}
    assert any("Adam" in node.op for node in copies.values())  # the optimizer's update, copied into the loop
    assert len(copies) > 20
    assert {node.device for node in copies.values()} == {nodes[name[len(scope):]].device
                                                        for name in copies} == {placed}
