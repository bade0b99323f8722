"""Each private member of TensorFlow the engine uses (estimator/tf_internals.py) exists in this TensorFlow and does
what the engine uses it for: a release that drops or changes one fails here, by name, before anything else."""

import numpy as np
import pytest
import tensorflow as tf

from elastimator.estimator import tf_internals


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def test_every_listed_module_is_importable_and_named_for_its_use():
    for name, use in tf_internals.MODULES.items():
        assert getattr(tf_internals, name).__name__.startswith("tensorflow.python."), name
        assert "If gone" in use, name


def test_an_op_ids_count_in_creation_order(graph):
    ops = [tf.constant(i, name=f"c{i}").op for i in range(3)]
    assert [tf_internals.op_id(op) for op in ops] == sorted(tf_internals.op_id(op) for op in ops)
    assert [op for op in graph.get_operations()] == sorted(graph.get_operations(), key=tf_internals.op_id)


def test_ops_that_tf_gradients_made_are_marked(graph):
    x = tf.constant([1.0, 2.0])
    y = tf.reduce_sum(x * x)
    tf.gradients(y, [x])
    made = [op for op in graph.get_operations() if tf_internals.made_by_gradients(op)]
    assert made and all(op.name.startswith("gradients/") for op in made)  # (an aggregating AddN is not marked)
    assert not tf_internals.made_by_gradients(y.op)


def test_a_finalized_graph_takes_ops_again_once_unfinalized(graph):
    graph.finalize()
    with pytest.raises(RuntimeError):
        tf.constant(1)
    tf_internals.unfinalize(graph)
    tf.constant(1)


def test_a_session_says_it_was_closed_and_a_made_callable_runs(graph):
    x = tf.constant([1.0, 2.0], name="x")
    from tensorflow.core.protobuf import config_pb2

    session = tf.compat.v1.Session(graph=graph)
    handle = tf_internals.make_callable_now(session, config_pb2.CallableOptions(fetch=["x:0"]))
    assert np.array_equal(tf_internals.do_call(session, handle)[0], [1.0, 2.0])
    assert not tf_internals.session_closed(session)
    session.close()
    assert tf_internals.session_closed(session)
    del x


def test_control_inputs_attributes_and_control_flow_contexts_of_built_ops(graph):
    a, b = tf.constant(1, name="a"), tf.constant(2, name="b")
    tf_internals.add_control_input(b.op, a.op)
    assert b.op.control_inputs == [a.op]
    tf_internals.set_attr(b.op, "_class", tf.compat.v1.AttrValue(list=tf.compat.v1.AttrValue.ListValue(s=[b"loc:@a"])))
    assert b.op.get_attr("_class") == [b"loc:@a"]
    assert tf_internals.control_flow_context(a.op) is None
    context = tf_internals.control_flow_ops.WhileContext(parallel_iterations=1, back_prop=False)
    assert context.IsWhileContext()


def test_a_strategys_private_switches(graph):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert tf_internals.in_multi_worker_mode(strategy) is False
    assert isinstance(tf_internals.on_default_cross_device_ops(strategy), bool)
    with tf_internals.scale_loss_for_estimator(strategy):
        pass
    assert tf_internals.cross_device_ops.select_cross_device_ops(["/cpu:0"]) is not None
    assert isinstance(tf_internals.update_config_proto(strategy, tf.compat.v1.ConfigProto()), tf.compat.v1.ConfigProto)


def test_an_optimizers_dense_resource_update(graph):
    variable = tf.compat.v1.Variable([1.0, 1.0], use_resource=True)
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.5)
    optimizer._prepare()  # pylint: disable=protected-access  (what minimize does before its updates)
    update = tf_internals.resource_apply_dense(optimizer, tf.constant([1.0, 2.0]), variable)
    with tf.compat.v1.Session(graph=graph) as session:
        session.run(variable.initializer)
        session.run(update)
        assert session.run(variable).tolist() == [0.5, 0.0]


def test_timed_hooks_timers_and_a_savers_steps_per_run(graph, tmp_path):
    tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.CheckpointSaverHook(str(tmp_path), save_steps=7)
    assert tf_internals.timer_every_steps(saver) == 7
    assert tf_internals.timer_last_triggered_step(saver) is None
    tf_internals.set_steps_per_run(saver, 1)
    by_time = tf.compat.v1.train.CheckpointSaverHook(str(tmp_path), save_secs=60)
    assert tf_internals.timer_every_steps(by_time) is None


def test_a_summary_writer_takes_a_graph_def_made_already(graph, tmp_path):
    tf.constant(1, name="one")
    writer = tf.compat.v1.summary.FileWriter(str(tmp_path), graph=None)
    assert tf_internals.writes_graph_def(writer)
    tf_internals.add_graph_def(writer, graph, graph.as_graph_def())
    writer.close()
    assert list(tmp_path.glob("events.out.tfevents.*"))


def test_monitored_session_bases_hold_what_the_engine_subclasses_use(graph):
    tf.constant(1)
    with tf.compat.v1.Session(graph=graph) as session:
        hooked = tf_internals.HookedSession(session, [])
        assert hooked._sess is session and hooked._hooks == []  # pylint: disable=protected-access
    assert issubclass(tf.compat.v1.train.MonitoredSession, tf_internals.MonitoredSessionBase)
    assert hasattr(tf_internals.CoordinatedSessionCreator, "create_session")


def test_a_keras_variables_tensorflow_variable(graph):
    import keras

    variable = keras.Variable(np.zeros(2, np.float32))
    assert tf_internals.keras_variable_value(variable) is not None
    assert tf_internals.keras_variable_value(object()) is None


def test_tf_keras_seed_generators_hold_a_per_thread_generator():
    generators = tf_internals.tf_keras_seed_generators()
    assert hasattr(generators, "__dict__")  # a threading.local


class CountsCalls(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self.calls = []

    def begin(self):
        self.calls.append("begin")

    def after_create_session(self, session, coord):
        self.calls.append("created")

    def after_run(self, run_context, run_values):
        self.calls.append("run")


@pytest.mark.parametrize("should_recover", [True, False])
def test_a_monitored_session_is_made_over_hooks_its_caller_has_begun(graph, should_recover):
    from elastimator.estimator.loops import hooked_session

    x = tf.constant(3.0)
    hook = CountsCalls()
    hook.begin()
    with hooked_session.ReusingMonitoredSession(tf.compat.v1.train.ChiefSessionCreator(), [hook],
                                                should_recover=should_recover, hooks_begun=True) as session:
        assert session.run(x) == 3.0
    assert hook.calls == ["begin", "created", "run"]  # begun once, by the caller
