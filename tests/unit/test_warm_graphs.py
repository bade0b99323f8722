"""evaluate and predict keep their graph and session for the next call (estimator/loops/warm_graphs.py): the model is
built once, the input_fn is called every call, the newest checkpoint is what the call reads, and anything whose
calls could differ is built afresh, as tf.estimator built it."""

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.estimator import tf_internals
from elastimator.estimator.loops import call_plan, warm_graphs
from elastimator.estimator.step import multi_batch
from tests.helpers import linear_model_fn, train_input


def counting(model_fn):
    """`model_fn` with a list of the modes it was called in."""
    modes = []

    def model_fn_counted(features, labels, mode, params):
        modes.append(mode)
        return model_fn(features, labels, mode, params)

    return model_fn_counted, modes


def dataset_input(x, y=None, batch_size=64):
    def input_fn():
        features = {"x": x}
        return tf.data.Dataset.from_tensor_slices((features, y) if y is not None else features).batch(batch_size)

    return input_fn


@pytest.fixture
def counted(make_estimator, iris):
    model_fn, modes = counting(linear_model_fn)
    estimator = make_estimator(model_fn, save_checkpoints_steps=20)
    estimator.train(train_input(*iris), steps=20)
    return estimator, modes


def fresh(estimator):
    """An estimator over the same model_dir that builds every call afresh, as tf.estimator did."""
    return est.Estimator(linear_model_fn, model_dir=estimator.model_dir, params=estimator.params,
                         config=estimator.config.replace(reuse_graphs=False))


def test_a_second_evaluation_builds_no_model_and_reads_the_newest_checkpoint(counted, iris):
    estimator, modes = counted
    x, y = iris
    first = estimator.evaluate(dataset_input(x, y))
    estimator.train(train_input(x, y), steps=20)  # a new checkpoint between the two evaluations
    second = estimator.evaluate(dataset_input(x, y))
    assert modes.count(est.ModeKeys.EVAL) == 1
    assert first["global_step"] == 20 and second["global_step"] == 40
    expected = fresh(estimator).evaluate(dataset_input(x, y))
    assert second == pytest.approx(expected)
    assert estimator.evaluate(dataset_input(x, y), steps=1) == pytest.approx(
        fresh(estimator).evaluate(dataset_input(x, y), steps=1))  # the metrics start from zero every call


class CountingCalls(tf.compat.v1.train.SessionRunHook):
    """Acts per session call (after_run): an evaluation with it runs one batch per call."""

    def __init__(self):
        self.calls = 0

    def after_run(self, run_context, run_values):
        self.calls += 1


class AtTheEnd(tf.compat.v1.train.SessionRunHook):
    """Acts once, at the end: an evaluation with it may run several batches per call."""

    def end(self, session):
        self.ended = True


LOOP_BUILT = f"Evaluation runs up to {multi_batch.PER_CALL} batches per session call"


def long_input(iris):
    """Batches of one: FEW_BATCHES and then some, ending inside a call of the loop."""
    x, y = iris
    long_x, long_y = np.concatenate([x, x, x, x[:1]]), np.concatenate([y, y, y, y[:1]])
    assert (len(long_x) - multi_batch.FEW_BATCHES) % multi_batch.PER_CALL
    return dataset_input(long_x, long_y, batch_size=1), len(long_x)


def one_per_call(estimator, input_fn, steps=None):
    counting_calls = CountingCalls()
    results = fresh(estimator).evaluate(input_fn, steps=steps, hooks=[counting_calls])
    assert counting_calls.calls == (steps or results_batches(input_fn))
    return results


def results_batches(input_fn):
    return sum(1 for _ in input_fn())


def test_a_long_evaluation_runs_several_batches_per_call_with_the_metrics_of_one_per_call(counted, iris, caplog):
    """Past FEW_BATCHES batches a kept graph runs up to PER_CALL batches per call (estimator/step/multi_batch.py);
    the metrics are exactly one batch per call's, where the input ends part way through a call and where `steps`
    ends the evaluation."""
    estimator, _ = counted
    input_fn, batches = long_input(iris)
    with caplog.at_level("INFO", logger="elastimator"):
        first = estimator.evaluate(input_fn)
        second = estimator.evaluate(input_fn, steps=45)  # the kept loop from the first batch
    assert caplog.text.count(LOOP_BUILT) == 1
    assert f"over {batches} batches" in caplog.text and "over 45 batches" in caplog.text
    assert first == one_per_call(estimator, input_fn)
    assert second == one_per_call(estimator, input_fn, steps=45)


def test_with_hooks_a_long_evaluation_loops_only_where_every_hook_acts_once(counted, iris, caplog):
    """A hook that acts per call (after_run) keeps one batch per call, as 2.15 ran it; one that acts once lets a
    graph built afresh (no kept graph: hooks) loop, with the same metrics."""
    estimator, _ = counted
    input_fn, batches = long_input(iris)
    with caplog.at_level("INFO", logger="elastimator"):
        expected = one_per_call(estimator, input_fn)
    assert LOOP_BUILT not in caplog.text
    at_the_end = AtTheEnd()
    with caplog.at_level("INFO", logger="elastimator"):
        assert estimator.evaluate(input_fn, hooks=[at_the_end]) == expected
    assert LOOP_BUILT in caplog.text and f"over {batches} batches" in caplog.text and at_the_end.ended


def test_a_long_evaluation_whose_batch_cannot_be_copied_runs_one_batch_per_call(make_estimator, iris, caplog):
    """TF1 control flow cannot be copied into the loop: the evaluation goes on one batch per call, whole."""

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        if mode != est.ModeKeys.EVAL:
            return spec
        tf.compat.v1.disable_control_flow_v2()
        try:
            doubled = tf.compat.v1.cond(tf.reduce_sum(features["x"]) > 0, lambda: spec.loss * 2.0, lambda: spec.loss)
        finally:
            tf.compat.v1.enable_control_flow_v2()
        metrics = {**spec.eval_metric_ops, "doubled": tf.compat.v1.metrics.mean(doubled)}
        return spec._replace(eval_metric_ops=metrics)

    estimator = make_estimator(model_fn=model_fn)
    estimator.train(train_input(*iris), steps=5)
    input_fn, batches = long_input(iris)
    with caplog.at_level("INFO", logger="elastimator"):
        first, second = estimator.evaluate(input_fn), estimator.evaluate(input_fn)
    assert LOOP_BUILT not in caplog.text and caplog.text.count(f"over {batches} batches") == 2
    assert first == second and first["doubled"] == pytest.approx(2 * first["loss"], rel=1e-5)
    assert tf.compat.v1.control_flow_v2_enabled()


def test_the_input_fn_runs_every_call_so_a_call_reads_the_data_of_its_time(counted, iris):
    estimator, modes = counted
    x, _ = iris
    rows = {"x": x[:10]}
    calls = []

    def input_fn():  # reads the program's state when called, as a glob of new files would
        calls.append(1)
        return tf.data.Dataset.from_tensor_slices({"x": rows["x"]}).batch(4)

    assert len(list(estimator.predict(input_fn))) == 10
    rows["x"] = x[10:35]
    predicted = list(estimator.predict(input_fn))
    assert len(calls) == 2 and len(predicted) == 25 and modes.count(est.ModeKeys.PREDICT) == 1
    expected = list(fresh(estimator).predict(input_fn))
    for ours, theirs in zip(predicted, expected):
        np.testing.assert_allclose(ours["probabilities"], theirs["probabilities"], rtol=1e-6)


def test_a_prediction_read_halfway_or_alongside_another_leaves_every_call_whole(counted, iris):
    estimator, modes = counted
    x, _ = iris
    whole = [p["classes"] for p in fresh(estimator).predict(dataset_input(x, batch_size=16))]
    stopped = estimator.predict(dataset_input(x, batch_size=16))
    next(stopped)
    stopped.close()
    assert [p["classes"] for p in estimator.predict(dataset_input(x, batch_size=16))] == whole
    # Two predictions read in turn: the second does not take the first one's graph.
    pairs = list(zip(estimator.predict(dataset_input(x, batch_size=16)), estimator.predict(dataset_input(x, batch_size=16))))
    assert [a["classes"] for a, _ in pairs] == whole and [b["classes"] for _, b in pairs] == whole
    assert modes.count(est.ModeKeys.PREDICT) == 2  # the first graph, and the one made beside it


def test_input_of_another_shape_predict_keys_or_params_build_the_model_again(counted, iris):
    estimator, modes = counted
    x, _ = iris
    list(estimator.predict(dataset_input(x, batch_size=16)))
    list(estimator.predict(dataset_input(x[:50], batch_size=16)))  # other rows, the same element spec: kept
    assert modes.count(est.ModeKeys.PREDICT) == 1
    list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": x}).batch(16, drop_remainder=True)))
    assert modes.count(est.ModeKeys.PREDICT) == 2  # a static batch size: another element spec
    list(estimator.predict(dataset_input(x), predict_keys="classes"))
    assert modes.count(est.ModeKeys.PREDICT) == 3


@pytest.mark.parametrize("why", ["hook", "reuse_graphs=False", "_call_model_fn", "seeded random op", "queue input"])
def test_calls_that_could_differ_build_afresh_every_time(make_estimator, iris, why):
    x, y = iris
    model_fn, modes = counting(linear_model_fn)
    hooks = None
    input_fn = dataset_input(x, y)
    if why == "hook":
        hooks = [tf.compat.v1.train.LoggingTensorHook({"step": "global_step"}, every_n_iter=100)]
    if why == "seeded random op":  # a fresh seeded graph draws the same numbers every call; a kept one would not
        def noisy(features, labels, mode, params):
            features = {"x": features["x"] + tf.random.uniform(tf.shape(features["x"]), maxval=0.5)}
            return model_fn(features, labels, mode, params)
    estimator = make_estimator(noisy if why == "seeded random op" else model_fn,
                               reuse_graphs=why != "reuse_graphs=False")
    if why == "_call_model_fn":
        class Growing(est.Estimator):  # as AdaNet: the graph comes through _call_model_fn, which may change
            def _call_model_fn(self, features, labels, mode, config):
                return super()._call_model_fn(features, labels, mode, config)

        estimator = Growing(model_fn, model_dir=estimator.model_dir, params=estimator.params, config=estimator.config)
    if why == "queue input":
        input_fn = lambda: ({"x": tf.constant(x)}, tf.constant(y))  # noqa: E731 - tensors, not a dataset
    estimator.train(train_input(x, y), steps=5)
    results = [estimator.evaluate(input_fn, steps=2, hooks=hooks) for _ in range(2)]
    assert modes.count(est.ModeKeys.EVAL) == 2
    assert results[0] == pytest.approx(results[1])  # the seeded draws too: the same numbers in both calls


def test_a_kept_graph_is_built_again_after_its_most_calls(counted, iris, monkeypatch):
    estimator, modes = counted
    monkeypatch.setattr(call_plan, "MAX_CALLS", 3)
    for _ in range(4):
        estimator.evaluate(dataset_input(*iris))
    assert modes.count(est.ModeKeys.EVAL) == 2


def test_a_checkpoint_written_again_under_its_name_is_read_again(make_estimator, iris, tmp_path):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=10)
    estimator.train(train_input(x, y), steps=10)
    before = estimator.evaluate(dataset_input(x, y))
    retrained = make_estimator(save_checkpoints_steps=10, tf_random_seed=8)  # same model_dir, trained anew
    import shutil  # pylint: disable=import-outside-toplevel

    shutil.rmtree(estimator.model_dir)
    retrained.train(train_input(x, y), steps=10)  # model.ckpt-10 again, other weights
    after = estimator.evaluate(dataset_input(x, y))
    assert after == pytest.approx(retrained.evaluate(dataset_input(x, y)))
    assert after["loss"] != pytest.approx(before["loss"])


def test_a_copied_estimator_keeps_graphs_of_its_own(counted, iris):
    import copy  # pylint: disable=import-outside-toplevel

    estimator, _ = counted
    estimator.evaluate(dataset_input(*iris))
    twin = copy.deepcopy(estimator)
    assert twin.evaluate(dataset_input(*iris)) == pytest.approx(estimator.evaluate(dataset_input(*iris)))


def test_a_prediction_that_changes_a_model_variable_starts_from_the_checkpoint_every_call(make_estimator, iris):
    x, y = iris

    def counting_batches(features, labels, mode, params):
        seen = tf.compat.v1.get_variable("batches_seen", [], tf.int64, tf.zeros_initializer(), trainable=False)
        if mode != est.ModeKeys.PREDICT:
            return linear_model_fn(features, labels, mode, params)
        with tf.control_dependencies([seen.assign_add(1)]):
            seen_now = tf.identity(seen.read_value())
        return est.EstimatorSpec(mode, predictions={"seen": tf.fill(tf.shape(features["x"])[:1], seen_now)})

    estimator = make_estimator(counting_batches)
    estimator.train(train_input(x, y), steps=5)
    for _ in range(2):  # a kept session that skipped the restore would go on counting from 3
        assert [int(p["seen"]) for p in estimator.predict(dataset_input(x[:48], batch_size=16))] == [1] * 16 + [2] * 16 + [3] * 16


def test_a_call_that_fails_in_a_kept_graph_says_why_and_the_next_call_builds_afresh(counted, iris):
    estimator, modes = counted
    x, y = iris
    estimator.evaluate(dataset_input(x, y))

    def third_batch_fails(i, batch):
        tf.debugging.assert_less(i, tf.constant(2, tf.int64), message="bad batch")
        return batch

    def failing_input():  # the same element spec as the kept graph's
        return dataset_input(x, y)().enumerate().map(third_batch_fails)

    with pytest.raises(tf.errors.InvalidArgumentError, match="bad batch"):
        estimator.evaluate(failing_input)
    assert modes.count(est.ModeKeys.EVAL) == 1  # the failing call reused the kept graph ...
    assert estimator.evaluate(dataset_input(x, y)) == pytest.approx(fresh(estimator).evaluate(dataset_input(x, y)))
    assert modes.count(est.ModeKeys.EVAL) == 2  # ... which it closed: the next call built its own


def test_a_kept_graph_makes_what_its_calls_run_once(counted, iris, monkeypatch):
    """A kept graph's first call makes its callables (counted where TensorFlow makes them: Session::MakeCallable
    through tf_internals, or Session.make_callable); its later calls make none."""
    estimator, _ = counted
    x, y = iris
    estimator.evaluate(dataset_input(x, y))
    list(estimator.predict(dataset_input(x)))
    estimator.train(train_input(x, y), steps=20)
    expected = fresh(estimator).evaluate(dataset_input(x, y))
    expected_probabilities = [p["probabilities"] for p in fresh(estimator).predict(dataset_input(x))]
    made = []
    make_now, make_callable = tf_internals.make_callable_now, tf.compat.v1.Session.make_callable
    monkeypatch.setattr(tf_internals, "make_callable_now",
                        lambda session, options: made.append(options) or make_now(session, options))
    monkeypatch.setattr(tf.compat.v1.Session, "make_callable",
                        lambda session, *args, **kwargs: made.append(args) or make_callable(session, *args, **kwargs))
    another = est.Estimator(linear_model_fn, model_dir=estimator.model_dir, params=estimator.params,
                            config=estimator.config)
    another.evaluate(dataset_input(x, y))
    list(another.predict(dataset_input(x)))
    assert len(made) >= 3  # a first evaluation's batch and results, a first prediction's batch
    made.clear()
    for _ in range(2):
        assert estimator.evaluate(dataset_input(x, y)) == pytest.approx(expected)
        np.testing.assert_allclose([p["probabilities"] for p in estimator.predict(dataset_input(x))],
                                   expected_probabilities, rtol=1e-6)
    assert made == []


_COLLECTED_INSIDE_THREADINGS_LOCK = """
import gc, sys, threading
import numpy as np, tensorflow as tf
import elastimator as est
from tests.helpers import linear_model_fn, train_input
x = np.random.RandomState(0).rand(96, 4).astype(np.float32)
y = np.arange(96) % 3
estimator = est.Estimator(linear_model_fn, model_dir=sys.argv[1], params={"n_classes": 3},
                          config=est.RunConfig(log_step_count_steps=None))
estimator.train(train_input(x, y), steps=5)
for _ in range(2):
    predictions = estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": x}).batch(16))
    next(predictions)
    cycle = [predictions]
    cycle.append(cycle)  # only the garbage collector closes it
    del predictions, cycle
    with threading._shutdown_locks_lock:  # where a Thread.join() may collect it
        gc.collect()
print("closed", len(list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices({"x": x}).batch(16)))))
"""


def test_a_prediction_left_unfinished_is_closed_even_by_the_garbage_collector_inside_threadings_lock(tmp_path):
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    from pathlib import Path  # pylint: disable=import-outside-toplevel

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _COLLECTED_INSIDE_THREADINGS_LOCK, str(tmp_path / "model")],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["closed", "96"]


def test_a_first_call_whose_checkpoint_lacks_a_variable_fails_by_name_and_keeps_nothing(make_estimator, iris):
    import threading  # pylint: disable=import-outside-toplevel

    x, y = iris

    def grows_in_eval(features, labels, mode, params):
        if mode == est.ModeKeys.EVAL:
            tf.compat.v1.get_variable("only_in_eval", [], initializer=tf.zeros_initializer())
        return linear_model_fn(features, labels, mode, params)

    estimator = make_estimator(grows_in_eval)
    estimator.train(train_input(x, y), steps=5)
    threads = set(threading.enumerate())
    for _ in range(2):  # nothing is kept: the second call fails the same way
        with pytest.raises(tf.errors.NotFoundError, match="only_in_eval"):
            estimator.evaluate(dataset_input(x, y))
    assert set(threading.enumerate()) <= threads
    assert est.ModeKeys.EVAL not in estimator._warm_graphs._kept  # pylint: disable=protected-access
