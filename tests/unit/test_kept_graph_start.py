"""A kept graph starts sooner (estimator/loops/callables.py): its callables' executors are built when they are made,
beside the restore; and what a kept graph's input reads (Python, tables) is read as a fresh graph reads it."""

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.estimator.loops import callables
from tests.helpers import linear_model_fn, train_input


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def test_a_callable_made_now_returns_what_session_run_returns(graph):
    counter = tf.Variable(3, name="counter")
    bumped = tf.Variable(0, name="bumped")
    x = tf.constant([1.5, 2.5], name="x")
    words = tf.constant([b"a", b"bc"])
    bump = bumped.assign_add(1).op
    fetches = {"x": x, "again": (x, "x:0"), "words": [words], "counter": counter, "bump": bump}
    with tf.compat.v1.Session(graph=graph) as session:
        session.run([counter.initializer, bumped.initializer])
        made = callables.made_now(session, fetches)
        expected = session.run(fetches)
        got = made()
        assert session.run(bumped) == 2  # the op ran in both
    assert got.keys() == expected.keys() and got["bump"] is None and isinstance(got["again"], tuple)
    for key in ("x", "counter"):
        assert type(got[key]) is type(expected[key]) and np.array_equal(got[key], expected[key])
    assert np.array_equal(got["again"][1], [1.5, 2.5]) and list(got["words"][0]) == [b"a", b"bc"]


@pytest.mark.parametrize("fetches_of", [
    lambda x, y, op: {"zeta": x, "alpha": y, "op": op},  # a flat dict (a prediction's): packed directly
    lambda x, y, op: x,
    lambda x, y, op: op,
    lambda x, y, op: [x, {"b": y, "a": (x, op)}],
], ids=["flat_dict", "tensor", "op", "nested"])
def test_a_made_callables_values_keep_session_runs_structure_and_order(graph, fetches_of):
    x = tf.constant([1, 2], name="x")
    y = tf.constant(3.5, name="y")
    fetches = fetches_of(x, y, tf.no_op())
    with tf.compat.v1.Session(graph=graph) as session:
        got, expected = callables.made_now(session, fetches)(), session.run(fetches)
    assert repr(tf.nest.map_structure(np.asarray, got)) == repr(tf.nest.map_structure(np.asarray, expected))
    if isinstance(fetches, dict):
        assert list(got) == list(expected) == ["zeta", "alpha", "op"]


def test_a_callable_made_now_builds_its_executors_as_it_is_made(graph):
    """A kernel that cannot be built fails the making, where Session.make_callable's fails at its first call."""
    bad = tf.strings.as_string(tf.constant(1.5), scientific=True, shortest=True)
    with tf.compat.v1.Session(graph=graph) as session:
        lazy = session.make_callable(bad)  # builds nothing yet
        with pytest.raises(tf.errors.InvalidArgumentError, match="scientific and shortest"):
            callables.made_now(session, bad)
        with pytest.raises(tf.errors.InvalidArgumentError, match="scientific and shortest"):
            lazy()


def test_a_failing_op_raises_from_a_made_callable_as_from_session_run(graph):
    get_next = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(1)).get_next()
    with tf.compat.v1.Session(graph=graph) as session:
        made = callables.made_now(session, get_next)
        assert made() == 0
        with pytest.raises(tf.errors.OutOfRangeError) as raised:
            made()
    assert raised.value.op is not None and raised.value.op.type == "IteratorGetNext"


def test_a_sparse_fetch_is_run_as_session_run_runs_it(graph):
    sparse = tf.sparse.SparseTensor(indices=[[0, 1]], values=[7], dense_shape=[2, 2])
    with tf.compat.v1.Session(graph=graph) as session:
        value = callables.made_now(session, {"s": sparse})()["s"]
    assert value.indices.tolist() == [[0, 1]] and value.values.tolist() == [7]


class ScaffoldInEval:
    """A model_fn whose evaluation spec has a scaffold of its own: its graph is not kept (warm_graphs)."""

    def __call__(self, features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        if mode != est.ModeKeys.EVAL:
            return spec
        return spec._replace(scaffold=tf.compat.v1.train.Scaffold())


@pytest.mark.parametrize("model_fn", [linear_model_fn, ScaffoldInEval()], ids=["kept", "not_kept"])
def test_an_evaluation_reads_every_example_once_whether_or_not_its_graph_is_kept(make_estimator, iris, model_fn):
    """The examples an input pulls through Python are each pulled once per evaluation, and the metrics cover them
    all, in a kept graph and in one built afresh."""
    x, y = iris
    pulled = []

    def pull(index):
        pulled.append(int(index))
        return index

    def python_input():
        indices = tf.data.Dataset.range(len(x)).map(
            lambda i: tf.ensure_shape(tf.numpy_function(pull, [i], tf.int64), []))
        return indices.map(lambda i: ({"x": tf.gather(x, i)}, tf.gather(y, i))).batch(16)

    def graph_input():
        return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(16)

    estimator = make_estimator(model_fn=model_fn)
    estimator.train(train_input(x, y), steps=5)
    from_python, from_graph = estimator.evaluate(python_input), estimator.evaluate(graph_input)
    assert sorted(pulled) == list(range(len(x)))
    assert from_python == pytest.approx(from_graph)
    fresh = est.Estimator(model_fn, model_dir=estimator.model_dir, config=estimator.config.replace(reuse_graphs=False))
    assert from_graph == pytest.approx(fresh.evaluate(graph_input))


def test_an_input_that_reads_a_table_it_made_starts_after_the_tables_are_initialized(make_estimator, iris):
    """A table made in input_fn is initialized with the model's local state (the scaffold's local init), after
    which the input may start: its pipeline reads it from the first element."""
    x, y = iris

    def table_input():
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant([0, 1, 2], tf.int64), tf.constant([2, 0, 1])), -1)
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, y.astype(np.int64)))
        return data.map(lambda features, label: (features, table.lookup(label))).batch(16)

    estimator = make_estimator()
    estimator.train(train_input(x, y), steps=5)
    first, second = estimator.evaluate(table_input), estimator.evaluate(table_input)
    fresh = est.Estimator(linear_model_fn, model_dir=estimator.model_dir,
                          config=estimator.config.replace(reuse_graphs=False))
    assert first == pytest.approx(fresh.evaluate(table_input)) and second == pytest.approx(first)
    for _ in range(2):  # prediction's kept graphs refuse the same input
        got = [p["classes"] for p in estimator.predict(table_input)]
        assert got == [p["classes"] for p in fresh.predict(table_input)] and len(got) == len(x)


def test_a_kept_graph_whose_next_input_reads_a_table_it_made_builds_afresh(make_estimator, iris):
    """The first call's input made no table, the next one's does: that call builds its graph afresh."""
    x, y = iris
    calls_made = []

    def input_fn():
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, y.astype(np.int64)))
        calls_made.append(1)
        if len(calls_made) > 1:
            keys = tf.constant([0, 1, 2], tf.int64)
            table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, keys), tf.constant(-1, tf.int64))
            data = data.map(lambda features, label: (features, table.lookup(label)))  # the same element spec
        return data.batch(16)

    estimator = make_estimator()
    estimator.train(train_input(x, y), steps=5)
    assert estimator.evaluate(input_fn) == pytest.approx(estimator.evaluate(input_fn))
