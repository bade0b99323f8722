"""Estimator.train: model_dir layout, resume, hooks, listeners and failure handling."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import ConfigError, ModelDirError, NanLossError
from tests.helpers import SavedSteps, eval_input, linear_model_fn, read_events, train_input


def test_model_dir_layout_matches_tf_estimator(make_estimator, iris):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=20, save_summary_steps=10, log_step_count_steps=10)
    estimator.train(train_input(x, y), max_steps=40)
    model_dir = estimator.model_dir
    state = open(os.path.join(model_dir, "checkpoint")).read()
    assert 'model_checkpoint_path: "model.ckpt-40"' in state  # relative paths, as tf.estimator wrote
    assert 'all_model_checkpoint_paths: "model.ckpt-0"' in state
    for step in (0, 20, 40):
        assert os.path.exists(os.path.join(model_dir, f"model.ckpt-{step}.index"))
        assert os.path.exists(os.path.join(model_dir, f"model.ckpt-{step}.meta"))
    assert os.path.exists(os.path.join(model_dir, "graph.pbtxt"))
    events = read_events(model_dir)
    assert [step for step, _ in events["loss"]][:4] == [1, 11, 21, 31]  # as tf.estimator recorded them
    assert "global_step/sec" in events
    assert estimator.latest_checkpoint().endswith("model.ckpt-40")


def test_the_graph_file_written_beside_training_is_whole_when_train_returns(make_estimator, iris):
    from google.protobuf import text_format  # pylint: disable=import-outside-toplevel

    estimator = make_estimator(save_checkpoints_steps=100)
    estimator.train(train_input(*iris), steps=200)  # several steps per call: the graph holds the loop's copies too
    written = text_format.Parse(open(os.path.join(estimator.model_dir, "graph.pbtxt")).read(), tf.compat.v1.GraphDef())
    saved = tf.compat.v1.MetaGraphDef()  # the first checkpoint's meta graph: the same graph
    with open(os.path.join(estimator.model_dir, "model.ckpt-0.meta"), "rb") as f:
        saved.ParseFromString(f.read())
    assert {n.name for n in written.node} == {n.name for n in saved.graph_def.node}
    assert any("steps_per_execution" in n.name for n in written.node)
    events = [event for path in glob.glob(os.path.join(estimator.model_dir, "events.out.tfevents.*"))
              for event in tf.compat.v1.train.summary_iterator(path) if event.graph_def]
    shown = tf.compat.v1.GraphDef.FromString(events[-1].graph_def)  # TensorBoard's: the last the events hold
    assert {n.name for n in shown.node} == {n.name for n in written.node}


def test_training_learns_and_resumes(make_estimator, iris):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=100)
    estimator.train(train_input(x, y), steps=150)
    assert estimator.get_variable_value("global_step") == 150
    estimator.train(train_input(x, y), steps=50)
    assert estimator.get_variable_value("global_step") == 200
    assert estimator.evaluate(eval_input(x, y))["accuracy"] > 0.9


def test_max_steps_already_reached_returns_at_once(make_estimator, iris):
    x, y = iris
    estimator = make_estimator()
    estimator.train(train_input(x, y), max_steps=10)
    calls = []

    def input_fn():
        calls.append(1)
        return train_input(x, y)()

    estimator.train(input_fn, max_steps=10)
    assert calls == [] and estimator.last_train_loss is None


def test_training_stops_when_input_ends(make_estimator, iris):
    x, y = iris
    estimator = make_estimator()
    estimator.train(train_input(x, y, batch_size=50, num_epochs=2))
    assert estimator.get_variable_value("global_step") == 6


def test_steps_and_max_steps_are_exclusive_and_positive(make_estimator, iris):
    estimator = make_estimator()
    with pytest.raises(ConfigError, match="steps or max_steps, not both"):
        estimator.train(train_input(*iris), steps=1, max_steps=2)
    with pytest.raises(ConfigError, match="steps must be a positive int"):
        estimator.train(train_input(*iris), steps=0)


class _Recorder(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self.begun = self.runs = self.ended = 0

    def begin(self):
        self.begun += 1

    def after_run(self, run_context, run_values):
        self.runs += 1

    def end(self, session):
        self.ended += 1


def test_user_spec_and_chief_hooks_run_and_listeners_see_every_save(make_estimator, iris):
    user, from_spec, chief = _Recorder(), _Recorder(), _Recorder()

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        return spec._replace(training_hooks=[from_spec], training_chief_hooks=[chief])

    listener = SavedSteps()
    estimator = make_estimator(model_fn=model_fn, save_checkpoints_steps=5)
    estimator.train(train_input(*iris), steps=12, hooks=[user], saving_listeners=[listener])
    for hook in (user, from_spec, chief):
        assert (hook.begun, hook.runs, hook.ended) == (1, 12, 1)
    assert listener.saved_steps == [0, 5, 10, 12]


def test_keep_checkpoint_max(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=2, keep_checkpoint_max=2)
    estimator.train(train_input(*iris), steps=10)
    kept = tf.train.get_checkpoint_state(estimator.model_dir).all_model_checkpoint_paths
    assert [os.path.basename(p) for p in kept] == ["model.ckpt-8", "model.ckpt-10"]
    assert not os.path.exists(os.path.join(estimator.model_dir, "model.ckpt-4.index"))


def test_nan_loss_stops_with_a_clear_error_and_keeps_the_last_good_checkpoint(make_estimator, iris):
    x, y = iris

    def model_fn(features, labels, mode, params):
        logits = tf.compat.v1.layers.dense(features["x"], 3, name="logits")
        step = tf.compat.v1.train.get_global_step()
        # A factor, not a summand: the gradient then needs the step read, which orders it before the increment
        # (an unordered read may see the step already incremented, on a loaded machine).
        poison = tf.where(step >= 7, np.nan, 1.0)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits) * poison
        train_op = tf.compat.v1.train.AdamOptimizer(0.05).minimize(loss, step)
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = make_estimator(model_fn=model_fn, save_checkpoints_steps=5)
    # The step that reads global step 7 is the one that makes it 8, as summaries and logs number it.
    with pytest.raises(NanLossError, match=r"Loss became nan at global step 8.*model.ckpt-5, is intact"):
        estimator.train(train_input(x, y), steps=20)
    assert estimator.latest_checkpoint().endswith("model.ckpt-5")
    assert np.all(np.isfinite(estimator.get_variable_value("logits/kernel")))


def test_model_dir_that_is_a_file(tmp_path):
    path = tmp_path / "not_a_dir"
    path.write_text("precious")
    with pytest.raises(ModelDirError, match="exists and is a file; expected a directory"):
        est.Estimator(linear_model_fn, model_dir=str(path))
    assert path.read_text() == "precious"


def test_model_dir_from_config_and_conflicts(tmp_path):
    config = est.RunConfig(model_dir=str(tmp_path / "a"))
    assert est.Estimator(linear_model_fn, config=config).model_dir == str(tmp_path / "a")
    assert est.Estimator(linear_model_fn, config=config).config.model_dir == str(tmp_path / "a")
    with pytest.raises(ConfigError, match="differs from config.model_dir"):
        est.Estimator(linear_model_fn, model_dir=str(tmp_path / "b"), config=config)
    assert est.Estimator(linear_model_fn).model_dir  # a temporary directory


def test_random_seed_makes_training_reproducible(tmp_path, iris):
    x, y = iris
    values = []
    for run in range(2):
        estimator = est.Estimator(linear_model_fn, model_dir=str(tmp_path / str(run)), params={"n_classes": 3},
                                  config=est.RunConfig(tf_random_seed=7))
        estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(50), steps=3)
        values.append(estimator.get_variable_value("logits/kernel"))
    np.testing.assert_array_equal(values[0], values[1])


def test_get_variable_names_and_missing_variable(make_estimator, iris):
    estimator = make_estimator()
    with pytest.raises(est.CheckpointError, match="No checkpoint in model_dir"):
        estimator.get_variable_names()
    estimator.train(train_input(*iris), steps=1)
    assert {"global_step", "logits/kernel", "logits/bias"} <= set(estimator.get_variable_names())
    with pytest.raises(est.CheckpointError, match="'nope' is not in checkpoint"):
        estimator.get_variable_value("nope")


def test_no_checkpoints_when_both_frequencies_are_none(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=None, save_checkpoints_secs=None)
    estimator.train(train_input(*iris), steps=3)
    assert estimator.latest_checkpoint() is None
    with pytest.raises(ConfigError, match="saving_listeners need checkpoints"):
        estimator.train(train_input(*iris), steps=3, saving_listeners=[SavedSteps()])


def test_user_scaffold_init_fn_runs_and_keeps_our_saver(make_estimator, iris):
    ran = []

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        return spec._replace(scaffold=tf.compat.v1.train.Scaffold(init_fn=lambda scaffold, session: ran.append(1)))

    estimator = make_estimator(model_fn=model_fn, save_checkpoints_steps=2, keep_checkpoint_max=1)
    estimator.train(train_input(*iris), steps=4)
    assert ran == [1]
    assert len(tf.train.get_checkpoint_state(estimator.model_dir).all_model_checkpoint_paths) == 1


def test_hooks_that_run_first_see_the_session_before_the_checkpoint_saver(make_estimator, iris):
    order = []

    class First(tf.compat.v1.train.SessionRunHook):
        runs_first = True

        def after_create_session(self, session, coord):
            files = os.listdir(estimator.model_dir) if os.path.isdir(estimator.model_dir) else []
            order.append(("first", [f for f in files if f.startswith(("model.ckpt", "checkpoint"))]))

    estimator = make_estimator(save_checkpoints_steps=100)
    estimator.train(train_input(*iris), steps=1, hooks=[First()])
    assert order == [("first", [])]  # nothing saved yet when it ran
    assert estimator.latest_checkpoint() is not None


class _VariableInBegin(tf.compat.v1.train.SessionRunHook):
    """Makes a global variable of its own in `begin`, after the model, and reads it after each step."""

    def begin(self):
        self.counter = tf.compat.v1.get_variable("hook_counter", [], tf.int64, initializer=tf.constant_initializer(7),
                                                 trainable=False)
        self.read = self.counter.read_value()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self.read)

    def after_run(self, run_context, run_values):
        self.value = int(run_values.results)


def test_a_variable_a_hook_makes_is_initialized_then_saved_and_restored(make_estimator, iris):
    # The chief's session leaves out the readiness checks: the saver, built after every hook's begin, covers
    # a hook's variable too, so it is initialized in a fresh model and restored from a checkpoint.
    estimator = make_estimator()
    hook = _VariableInBegin()
    estimator.train(train_input(*iris), steps=2, hooks=[hook])
    assert hook.value == 7
    assert "hook_counter" in estimator.get_variable_names()
    again = _VariableInBegin()
    estimator.train(train_input(*iris), steps=2, hooks=[again])
    assert again.value == 7 and estimator.get_variable_value("global_step") == 4


def test_a_checkpoint_without_a_variable_of_the_model_fails_the_restore_by_name(make_estimator, iris):
    estimator = make_estimator()
    estimator.train(train_input(*iris), steps=1)
    with pytest.raises(tf.errors.NotFoundError, match="hook_counter"):
        estimator.train(train_input(*iris), steps=1, hooks=[_VariableInBegin()])


def test_a_scaffold_whose_local_init_leaves_a_variable_uninitialized_is_not_ready(make_estimator, iris):
    # A model's own local init op keeps TensorFlow's readiness checks, and their error, as tf.estimator had.
    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        tf.compat.v1.get_local_variable("left_out", [], tf.float32, initializer=tf.zeros_initializer())
        return spec._replace(scaffold=tf.compat.v1.train.Scaffold(local_init_op=tf.no_op()))

    with pytest.raises(RuntimeError, match="left_out"):
        make_estimator(model_fn=model_fn).train(train_input(*iris), steps=1)
