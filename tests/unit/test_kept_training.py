"""A `train` call keeps its graph and session for the next one (estimator/loops/kept_training.py): the model is built
once, the input_fn is called every call, every hook is made and run anew, the newest checkpoint is what a call
resumes from, and whatever could make a call differ from a fresh one builds afresh, as tf.estimator built it."""

import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.estimator.loops import call_plan, kept_training
from elastimator.estimator.step import steps_per_call
from tests.helpers import SavedSteps, linear_model_fn

KEPT = "Training in the graph and session kept from the last train call"


def counting(model_fn=linear_model_fn):
    """`model_fn` with a list of the modes it was called in."""
    modes = []

    def model_fn_counted(features, labels, mode, params):
        modes.append(mode)
        return model_fn(features, labels, mode, params)

    return model_fn_counted, modes


def repeated(x, y, batch_size=16):
    """The same batches in the same order every call: a kept graph and a fresh one see the same data."""
    def input_fn():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(batch_size).repeat()

    return input_fn


def estimator_in(path, model_fn=linear_model_fn, **config):
    config.setdefault("log_step_count_steps", None)
    config.setdefault("save_checkpoints_steps", 15)
    config.setdefault("tf_random_seed", 5)  # the same initial weights in every model_dir
    return est.Estimator(model_fn, model_dir=str(path), params={"n_classes": 3}, config=est.RunConfig(**config))


def weights(estimator) -> dict:
    return {name: estimator.get_variable_value(name) for name in estimator.get_variable_names()}


def assert_same_model(ours, theirs):
    a, b = weights(ours), weights(theirs)
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)


def checkpoint_files(model_dir) -> list[str]:
    return sorted(name for name in os.listdir(model_dir) if name.startswith("model.ckpt-") and name.endswith(".index"))


def listed(estimator) -> list[str]:
    """The checkpoints the state file lists."""
    return [os.path.basename(p) for p in tf.train.get_checkpoint_state(estimator.model_dir).all_model_checkpoint_paths]


def test_a_second_train_call_builds_no_model_and_trains_on_as_a_fresh_graph_would(tmp_path, iris, caplog):
    model_fn, modes = counting()
    ours = estimator_in(tmp_path / "kept", model_fn)
    theirs = estimator_in(tmp_path / "fresh", reuse_graphs=False)
    with caplog.at_level("INFO", logger="elastimator"):
        for estimator in (ours, theirs):
            for _ in range(3):
                estimator.train(repeated(*iris), steps=20)
    assert modes.count(est.ModeKeys.TRAIN) == 1 and caplog.text.count(KEPT) == 2
    assert ours.get_variable_value("global_step") == 60
    assert_same_model(ours, theirs)
    assert ours.last_train_loss == pytest.approx(theirs.last_train_loss, rel=1e-5)
    # The same checkpoints, and the state file lists the last call's only, as a new saver's did.
    assert checkpoint_files(ours.model_dir) == checkpoint_files(theirs.model_dir)
    assert listed(ours) == listed(theirs)


def test_a_checkpoint_written_by_another_program_or_rolled_back_is_what_the_next_call_resumes_from(tmp_path, iris):
    model_fn, modes = counting()
    ours = estimator_in(tmp_path / "model", model_fn)
    ours.train(repeated(*iris), steps=20)
    estimator_in(tmp_path / "model", reuse_graphs=False).train(repeated(*iris), steps=10)  # another program: 30
    ours.train(repeated(*iris), steps=10)
    assert ours.get_variable_value("global_step") == 40 and modes.count(est.ModeKeys.TRAIN) == 1
    # Rolled back: the state file names step 30's checkpoint again.
    rolled = os.path.join(ours.model_dir, "model.ckpt-30")
    tf.compat.v1.train.update_checkpoint_state(ours.model_dir, rolled)
    ours.train(repeated(*iris), steps=5)
    assert ours.latest_checkpoint().endswith("model.ckpt-35") and modes.count(est.ModeKeys.TRAIN) == 1
    theirs = estimator_in(tmp_path / "again", reuse_graphs=False)
    for steps in (20, 10, 10):
        theirs.train(repeated(*iris), steps=steps)
    tf.compat.v1.train.update_checkpoint_state(theirs.model_dir, os.path.join(theirs.model_dir, "model.ckpt-30"))
    theirs.train(repeated(*iris), steps=5)
    assert_same_model(ours, theirs)


def test_without_checkpoints_every_call_starts_from_the_initializers_as_in_tf_estimator(tmp_path, iris):
    ours = estimator_in(tmp_path / "model", save_checkpoints_steps=None, save_checkpoints_secs=None)
    ours.train(repeated(*iris), steps=20)
    assert ours.latest_checkpoint() is None
    ours.train(repeated(*iris), steps=20)
    assert ours.latest_checkpoint() is None


class Recording(tf.compat.v1.train.SessionRunHook):
    """What a hook of the program's own sees; it acts per session call, so training runs one step per call."""

    def __init__(self):
        self.events = []

    def begin(self):
        self.events.append("begin")

    def after_create_session(self, session, coord):
        self.events.append(("created", int(session.run(tf.compat.v1.train.get_global_step()))))

    def after_run(self, run_context, run_values):
        self.events.append("step")

    def end(self, session):
        self.events.append(("end", int(session.run(tf.compat.v1.train.get_global_step()))))


def test_hooks_and_listeners_are_run_anew_in_a_kept_graph_as_in_a_fresh_one(tmp_path, iris):
    model_fn, modes = counting()
    seen = {}
    for name, estimator in (("kept", estimator_in(tmp_path / "kept", model_fn)),
                            ("fresh", estimator_in(tmp_path / "fresh", reuse_graphs=False))):
        estimator.train(repeated(*iris), steps=20)
        hook, listener = Recording(), SavedSteps()
        estimator.train(repeated(*iris), steps=20, hooks=[hook], saving_listeners=[listener])
        seen[name] = (hook.events, listener.saved_steps)
    assert modes.count(est.ModeKeys.TRAIN) == 1
    assert seen["kept"] == seen["fresh"]
    events, saves = seen["kept"]
    assert events == ["begin", ("created", 20)] + ["step"] * 20 + [("end", 40)] and saves == [20, 35, 40]


def test_a_kept_loop_of_steps_serves_a_short_call_and_a_per_call_hook_builds_one_step_per_call(tmp_path, iris, caplog):
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn, save_checkpoints_steps=100)
    long_call = steps_per_call.FEW_STEPS
    with caplog.at_level("INFO", logger="elastimator"):
        estimator.train(repeated(*iris), steps=long_call)  # built with the loop of steps
        estimator.train(repeated(*iris), steps=7)  # fewer steps than pay for a loop: the kept loop serves them
    assert "up to 20 steps per session call" in caplog.text and modes.count(est.ModeKeys.TRAIN) == 1
    assert estimator.get_variable_value("global_step") == long_call + 7
    estimator.train(repeated(*iris), steps=3, hooks=[Recording()])  # acts per call: one step per call, built anew
    assert modes.count(est.ModeKeys.TRAIN) == 2 and estimator.get_variable_value("global_step") == long_call + 10
    estimator.train(repeated(*iris), steps=3)
    assert modes.count(est.ModeKeys.TRAIN) == 2  # a one-step graph serves a short call
    estimator.train(repeated(*iris), steps=long_call)
    assert modes.count(est.ModeKeys.TRAIN) == 3  # a long call: the loop is built
    x, y = iris
    estimator.evaluate(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(50))  # closes the session
    estimator.train(repeated(*iris), steps=3)  # the loop would be optimized again in a new session: built afresh
    assert modes.count(est.ModeKeys.TRAIN) == 4
    assert estimator.get_variable_value("global_step") == 2 * long_call + 16


def with_training_hook(features, labels, mode, params):
    spec = linear_model_fn(features, labels, mode, params)
    if mode != est.ModeKeys.TRAIN:
        return spec
    return spec._replace(training_hooks=[tf.compat.v1.train.LoggingTensorHook({"loss": spec.loss}, every_n_iter=50)])


def with_dropout(features, labels, mode, params):
    dropped = {"x": tf.nn.dropout(features["x"], rate=0.1) if mode == est.ModeKeys.TRAIN else features["x"]}
    return linear_model_fn(dropped, labels, mode, params)


class MakesAVariable(tf.compat.v1.train.SessionRunHook):
    def begin(self):
        self.variable = tf.compat.v1.Variable(0, name="made_by_a_hook",
                                              collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])


def shuffled(x, y):
    return lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).shuffle(50).batch(16).repeat()


@pytest.mark.parametrize("why", ["model's training hooks", "reuse_graphs=False", "seeded dropout", "seeded shuffle",
                                 "a hook's variable"])
def test_calls_that_could_differ_build_afresh_every_time(tmp_path, iris, why):
    model_fn, modes = counting({"model's training hooks": with_training_hook, "seeded dropout": with_dropout}.get(
        why, linear_model_fn))
    config = {"reuse_graphs=False": {"reuse_graphs": False}}.get(why, {})
    estimator = estimator_in(tmp_path / "model", model_fn, **config)
    input_fn = shuffled(*iris) if why == "seeded shuffle" else repeated(*iris)
    hooks = [MakesAVariable()] if why == "a hook's variable" else []
    for _ in range(3):
        estimator.train(input_fn, steps=5, hooks=hooks)
    assert modes.count(est.ModeKeys.TRAIN) == 3
    assert estimator.get_variable_value("global_step") == 15


def test_a_hook_whose_begin_adds_state_to_a_kept_graph_gets_a_graph_built_afresh_with_it(tmp_path, iris, caplog):
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn)
    estimator.train(repeated(*iris), steps=5)  # kept
    hook = MakesAVariable()
    with caplog.at_level("INFO", logger="elastimator"):
        estimator.train(repeated(*iris), steps=5, hooks=[hook])
    assert "Building the training graph afresh: the hooks' begin added variables" in caplog.text
    assert modes.count(est.ModeKeys.TRAIN) == 2 and estimator.get_variable_value("global_step") == 10
    caplog.clear()
    with caplog.at_level("INFO", logger="elastimator"):
        estimator.train(repeated(*iris), steps=5)  # the graph of the call before was not kept
    assert KEPT not in caplog.text and modes.count(est.ModeKeys.TRAIN) == 3


def test_seeded_training_without_random_numbers_is_kept_and_repeats_exactly(tmp_path, iris):
    model_fn, modes = counting()
    runs = []
    for name in ("one", "two"):
        estimator = estimator_in(tmp_path / name, model_fn, tf_random_seed=11)
        estimator.train(repeated(*iris), steps=10)
        estimator.train(repeated(*iris), steps=10)
        runs.append(estimator)
    assert modes.count(est.ModeKeys.TRAIN) == 2  # one graph per estimator
    assert_same_model(*runs)


def test_a_failed_call_closes_its_graph_and_the_next_call_builds_afresh(tmp_path, iris):
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn)
    estimator.train(repeated(*iris), steps=10)
    x, y = iris
    with pytest.raises(tf.errors.InvalidArgumentError):  # a label out of range fails a step
        estimator.train(repeated(x, np.full_like(y, 7)), steps=10)
    assert estimator.get_variable_value("global_step") == 10  # the last good checkpoint is where it was
    estimator.train(repeated(*iris), steps=10)
    assert modes.count(est.ModeKeys.TRAIN) == 2 and estimator.get_variable_value("global_step") == 20


def test_input_of_another_element_spec_builds_the_model_again(tmp_path, iris):
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn)
    x, y = iris
    estimator.train(repeated(x, y), steps=5)
    estimator.train(repeated(x[:60], y[:60]), steps=5)  # other rows, the same element spec: kept
    assert modes.count(est.ModeKeys.TRAIN) == 1
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(16, drop_remainder=True).repeat(),
                    steps=5)
    assert modes.count(est.ModeKeys.TRAIN) == 2 and estimator.get_variable_value("global_step") == 15


def test_evaluation_between_train_calls_closes_the_training_session_and_keeps_its_graph(tmp_path, iris):
    """An evaluation opens a session of its own: the kept training session is closed first (the model and its
    optimizer's slots are not held beside it), and the next train call opens one on the kept graph."""
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn)
    fresh = estimator_in(tmp_path / "model", reuse_graphs=False)
    x, y = iris
    eval_input = lambda: tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(50)  # noqa: E731
    kept = lambda: estimator._warm_graphs._kept[est.ModeKeys.TRAIN]  # noqa: E731  pylint: disable=protected-access
    for step in (10, 20, 30):
        estimator.train(repeated(x, y), steps=10)
        assert kept().session is not None
        results = estimator.evaluate(eval_input)
        assert kept().session is None
        assert results["global_step"] == step
        assert results == pytest.approx(fresh.evaluate(eval_input))
    assert modes.count(est.ModeKeys.TRAIN) == 1 and modes.count(est.ModeKeys.EVAL) == 1
    theirs = estimator_in(tmp_path / "fresh", reuse_graphs=False)
    for _ in range(3):
        theirs.train(repeated(x, y), steps=10)
        theirs.evaluate(eval_input)
    assert_same_model(estimator, theirs)
    assert checkpoint_files(estimator.model_dir) == checkpoint_files(theirs.model_dir)
    assert listed(estimator) == listed(theirs)


def test_a_model_past_the_kept_size_is_built_afresh_every_call(tmp_path, iris, monkeypatch):
    monkeypatch.setattr(call_plan, "MAX_KEPT_BYTES", 64)  # the classifier's 15 weights, Adam's slots: more
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn)
    for _ in range(2):
        estimator.train(repeated(*iris), steps=5)
    assert modes.count(est.ModeKeys.TRAIN) == 2


def test_an_input_fn_that_makes_a_table_is_built_afresh_every_call(tmp_path, iris):
    model_fn, modes = counting()
    estimator = estimator_in(tmp_path / "model", model_fn)
    x, y = iris

    def input_fn():  # a vocabulary lookup made by the input_fn, as feature pipelines do
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([0, 1, 2], [0, 1, 2]), default_value=0)
        labels = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).map(lambda f, l: (f, table.lookup(l)))
        return labels.batch(16).repeat()

    for _ in range(2):
        estimator.train(input_fn, steps=5)
    assert modes.count(est.ModeKeys.TRAIN) == 2 and estimator.get_variable_value("global_step") == 10
