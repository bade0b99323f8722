"""The verbs' monitored session: what every hook sees is what TensorFlow's MonitoredSession shows it, call for call,
while a merged fetch structure it has seen is run through the callable kept for it."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import tensorflow as tf

from elastimator.estimator.loops.hooked_session import ReusingMonitoredSession, fetch_shape

Pair = collections.namedtuple("Pair", ["step", "doubled"])


class Recorder(tf.compat.v1.train.SessionRunHook):
    """Asks for a fetch structure (chosen per call by `request`) and records what after_run gets."""

    def __init__(self, request):
        self._request, self._calls = request, 0
        self.seen: list = []

    def before_run(self, run_context):
        self._calls += 1
        return self._request(self._calls)

    def after_run(self, run_context, run_values):
        self.seen.append((_plain(run_values.results), bool(run_values.run_metadata.step_stats.dev_stats),
                          run_context.original_args.fetches is not None))


def _plain(value):
    """Results with their container types kept and numpy values made comparable."""
    if isinstance(value, dict):
        return (type(value).__name__, [(k, _plain(v)) for k, v in value.items()])
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, [_plain(v) for v in value])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_plain(v) for v in value])
    if isinstance(value, tf.compat.v1.SparseTensorValue):
        return ("sparse", value.indices.tolist(), value.values.tolist())
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.tolist())
    if isinstance(value, np.generic):
        return (type(value).__name__, value.item())
    return value


def _run(session_class, calls: int = 6):
    """Runs `calls` calls of a small counter graph under `session_class` and returns what each hook saw."""
    with tf.Graph().as_default():
        counter = tf.compat.v1.train.get_or_create_global_step()
        increment = tf.compat.v1.assign_add(counter, 1)
        step = tf.identity(increment, name="step")  # every fetch follows the increment: values are deterministic
        doubled = tf.identity(step * 2, name="doubled")
        sparse = tf.sparse.SparseTensor([[0, 0]], tf.reshape(tf.cast(step, tf.float32), [1]), [1, 1])
        fed = tf.compat.v1.placeholder_with_default(tf.constant(1.0), [], name="fed")
        trace = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        hooks = [
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs([step, (doubled,)])),
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(Pair(step, doubled))),
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(
                collections.OrderedDict(b=doubled, a={"name": "doubled:0", "op": increment.op}))),
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(step) if n % 2 else None),  # varies per call
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(sparse) if n == 3 else None),  # Session.run path
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(fed, feed_dict={fed: 5.0}) if n == 4 else None),
            Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(doubled, options=trace) if n == 5 else None),
        ]
        returned = []
        with session_class(tf.compat.v1.train.ChiefSessionCreator(), hooks) as session:
            for _ in range(calls):
                returned.append(_plain(session.run({"increment": increment, "pair": [doubled]})))
        return returned, [hook.seen for hook in hooks]


def test_hooks_see_what_tensorflows_monitored_session_shows_them():
    ours = _run(lambda creator, hooks: ReusingMonitoredSession(creator, hooks))
    tensorflows = _run(lambda creator, hooks: tf.compat.v1.train.MonitoredSession(creator, hooks))
    assert ours == tensorflows
    returned, seen = ours
    assert returned[-1] == ("dict", [("increment", ("int64", 6)), ("pair", ("list", [("int64", 12)]))])
    assert seen[5][3][0] == ("array", "float32", 5.0)  # the fed value
    assert [traced for _, traced, _ in seen[6]] == [False] * 4 + [True, False]  # the trace reaches after_run


def _failure(session_class):
    with tf.Graph().as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        check = tf.debugging.assert_less(step, tf.constant(2, tf.int64), message="step too far")
        with tf.control_dependencies([check]):
            increment = tf.compat.v1.assign_add(step, 1)
        hook = Recorder(lambda n: tf.compat.v1.train.SessionRunArgs(step))
        with pytest.raises(tf.errors.InvalidArgumentError, match="step too far") as raised:
            with session_class(tf.compat.v1.train.ChiefSessionCreator(), [hook]) as session:
                for _ in range(3):
                    session.run(increment)
        return type(raised.value), raised.value.message, getattr(raised.value.op, "name", None), len(hook.seen)


def test_an_op_failure_raises_what_session_run_raises():
    assert _failure(ReusingMonitoredSession) == _failure(tf.compat.v1.train.MonitoredSession)


def test_each_fetch_structure_gets_one_callable():
    with tf.Graph().as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        increment = tf.compat.v1.assign_add(step, 1)
        hook = Recorder(lambda n: tf.compat.v1.train.SessionRunArgs([step]) if n % 3 == 0 else None)
        made = []
        with ReusingMonitoredSession(tf.compat.v1.train.ChiefSessionCreator(), [hook]) as session:
            raw = session._tf_sess()  # pylint: disable=protected-access
            make_callable = raw.make_callable
            raw.make_callable = lambda *a, **k: made.append(a) or make_callable(*a, **k)
            for _ in range(30):
                session.run([increment, step])
    assert len(made) == 2  # with and without the hook's fetch


def test_fetch_shape_tells_structures_apart_and_leaves_other_fetches_to_session_run():
    with tf.Graph().as_default():
        a, b = tf.constant(1), tf.constant(2)
        assert fetch_shape([a, {"x": b}]) == fetch_shape([a, {"x": b}])
        assert fetch_shape([a, b]) != fetch_shape((a, b)) != fetch_shape([b, a])
        assert fetch_shape({"x": a, "y": b}) != fetch_shape({"y": b, "x": a})  # results keep the key order
        assert fetch_shape(Pair(a, b)) != fetch_shape((a, b))
        assert fetch_shape("Const:0") == ("name", "Const:0")
        assert fetch_shape([a, tf.sparse.SparseTensor([[0]], [1], [1])]) is None
