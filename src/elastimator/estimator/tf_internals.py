"""Every private member of TensorFlow (and of Keras) that the engine uses, in one place.

TensorFlow keeps graph mode, sessions and the v1 training classes, but some of
what tf.estimator 2.15 did (and what the engine does faster) has no public
spelling. Each use goes through a name here, whose docstring says what it is
for and what to do if a release drops or changes it. Nothing else in
`estimator/` reaches into TensorFlow's private members or its
`tensorflow.python` modules.

`tests/unit/test_tf_internals.py` checks that each member exists in the
installed TensorFlow, so a release that drops one fails one test that names
it; the TensorFlow 2.16 smoke run and `scripts/nightly_check.sh` run that test.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import tensorflow as tf
from tensorflow.python.distribute import cross_device_ops  # pylint: disable=no-name-in-module
from tensorflow.python.distribute import mirrored_strategy  # pylint: disable=no-name-in-module
from tensorflow.python.eager import context  # pylint: disable=no-name-in-module
from tensorflow.python.framework import meta_graph, op_def_registry
from tensorflow.python.lib.io import file_io
from tensorflow.python.ops import control_flow_ops
from tensorflow.python.training import monitored_session  # pylint: disable=no-name-in-module
from tensorflow.python.util import deprecation

# pylint: disable=protected-access

# Modules of tensorflow.python, each for what tf's public API does not offer.
MODULES = {
    "cross_device_ops": "select_cross_device_ops: a MirroredStrategy's cross-device ops for sessions (replicas.py). "
                        "If gone: tf.distribute.ReductionToOneDevice for CPU-only device lists.",
    "mirrored_strategy": "MirroredExtended, to tell a MirroredStrategy left on its defaults (replicas.py). If gone: "
                         "compare type(strategy.extended).__name__.",
    "context": "context.context().config.device_count: the logical devices a program configured (run_config.py). "
               "If gone: tf.config.list_logical_devices().",
    "meta_graph": "create_meta_graph_def for the events' meta graph (saver_hook.py), as TensorFlow's own "
                  "CheckpointSaverHook writes it. If gone: tf.compat.v1.train.export_meta_graph(as_text=False).",
    "op_def_registry": "whether an op type is stateful (graph/effects.py: random ops). If gone: "
                       "op.op_def.is_stateful on each op.",
    "file_io": "atomic_write_string_to_file for graph.pbtxt on any file system (saver_hook.py). If gone: "
               "tf.io.gfile.GFile to a temporary name, then tf.io.gfile.rename.",
    "control_flow_ops": "WhileContext: TF1's while loop, built without the process-wide control-flow-v2 switch "
                        "(multi_step.py). If gone: a loop of several steps cannot be built; every call runs one "
                        "step.",
    "monitored_session": "_HookedSession, _MonitoredSession and its _CoordinatedSessionCreator, the bases of "
                         "hooked_session.ReusingMonitoredSession, and _RecoverableSession. If gone: tf.compat.v1.train.MonitoredSession "
                         "itself, each step through Session.run (slower by a plan per call).",
    "deprecation": "silence() around make_initializer (calls.py), which reads the iterator's deprecated "
                   "properties. If gone: the warning shows once; nothing else changes.",
}

HookedSession = monitored_session._HookedSession
"""TensorFlow's session that calls the hooks around each run; the engine's subclass uses its `_sess` (the session
inside) and `_hooks`. If gone: run hooks through tf.compat.v1.train.MonitoredSession."""

MonitoredSessionBase = monitored_session._MonitoredSession
"""The base of tf.compat.v1.train.MonitoredSession that takes a session creator and hooks. If gone: subclass
tf.compat.v1.train.MonitoredSession, passing its arguments through."""

CoordinatedSessionCreator = monitored_session._MonitoredSession._CoordinatedSessionCreator
"""What makes a monitored session's coordinated session; the subclass uses its `tf_sess`, `_hooks`,
`_session_creator`, and the coordinated session's `_sess`. If gone: as for MonitoredSessionBase."""


def start_monitored_session(session, creator, hooks: list, should_recover: bool) -> None:
    """Makes `session` (a MonitoredSessionBase subclass, its __init__ not run) what _MonitoredSession.__init__
    makes it once it has called each hook's `begin`: the coordinated session over `hooks`, recovering through
    _RecoverableSession where `should_recover`. Sets the attributes its methods read (`_graph_was_finalized`,
    `_hooks`, `_coordinated_creator`, `_sess`). If gone or renamed: let the monitored session call `begin`
    itself, and check what the hooks added to the graph in the session creator instead."""
    session._graph_was_finalized = tf.compat.v1.get_default_graph().finalized
    session._hooks = hooks
    session._coordinated_creator = session._CoordinatedSessionCreator(
        session_creator=creator, hooks=hooks, stop_grace_period_secs=120)
    session._sess = (monitored_session._RecoverableSession(session._coordinated_creator) if should_recover
                     else session._coordinated_creator.create_session())


def op_id(op) -> int:
    """An op's creation index in its graph (Operation._id): the graph analyses tell the model's ops from the input's
    by it. If gone: number `graph.get_operations()` in order (they are listed in creation order)."""
    return op._id


def made_by_gradients(op) -> bool:
    """Whether `tf.gradients` made an op: it records on each the forward op it differentiates
    (Operation._original_op). If gone: treat no op as a gradient's (the Keras trap then also attaches updates
    computed from gradients, which a dropped optimizer makes)."""
    return getattr(op, "_original_op", None) is not None


def unfinalize(graph) -> None:
    """Lets ops be added to a finalized graph a kept session runs (Graph._unsafe_unfinalize): a call's input pipeline
    joins the kept graph. If gone: build afresh every call (RunConfig(reuse_graphs=False) behaviour)."""
    graph._unsafe_unfinalize()


def session_closed(session) -> bool:
    """Whether a tf.compat.v1.Session was closed, by close() or its finalizer (BaseSession._closed). If gone: keep a
    flag beside each session the engine closes, and treat a collected one as closed."""
    return session._closed


def do_call(session, fn: Callable, *args) -> Any:
    """Runs `fn(*args)` as Session.run runs its C call (BaseSession._do_call): an op's failure raised with the node
    and message Session.run gives it. If gone: call `fn` and translate tf.errors yourself."""
    return session._do_call(fn, *args)


def make_callable_now(session, options) -> Any:
    """A handle of Session::MakeCallable for `options` (BaseSession._make_callable_from_options), which builds the
    executors as it is made, run with `do_call(session, handle)`. If gone: Session.make_callable (executors built
    at the first call instead)."""
    return do_call(session, session._make_callable_from_options, options)


def add_control_input(op, control) -> None:
    """Adds a control input to a built op (Operation._add_control_input): a copied step's ops wait on the step's
    reads, a write waits on its gate. Never on an op a session has run (TensorFlow warns of that mutation). If
    gone: build the op inside tf.control_dependencies instead."""
    op._add_control_input(control)


def set_attr(op, name: str, value) -> None:
    """Sets an attribute of a built op (Operation._set_attr): a copied op's colocation. Never on an op a session has
    run. If gone: build the copy under tf.compat.v1.colocate_with."""
    op._set_attr(name, value)


def control_flow_context(op):
    """The TF1 control-flow context an op was built in (Operation._get_control_flow_context), None outside one. If
    gone: treat every op as inside control flow (gates checked in Python)."""
    return op._get_control_flow_context()


def in_multi_worker_mode(strategy) -> bool:
    """Whether a strategy's replicas span processes (StrategyExtended._in_multi_worker_mode). If gone: whether
    TF_CONFIG's cluster has more than one chief/worker task."""
    return strategy.extended._in_multi_worker_mode()


def update_config_proto(strategy, config):
    """A session config with what a multi-process strategy needs (its collectives' group leader, scoped allocator:
    StrategyExtended._update_config_proto). If gone: set those ConfigProto fields from TF_CONFIG."""
    return strategy.extended._update_config_proto(config)


def scale_loss_for_estimator(strategy) -> contextlib.AbstractContextManager:
    """2.15's switch under which a strategy scales losses by the replicas, as tf.estimator built them
    (Strategy._scale_loss_for_estimator_enabled). If gone: divide each replica's loss by the number of replicas."""
    return strategy._scale_loss_for_estimator_enabled()


def on_default_cross_device_ops(strategy) -> bool:
    """Whether a MirroredStrategy was left on its default cross-device ops (MirroredExtended._cross_device_ops is
    its _collective_ops), which sessions cannot run on CPUs. If gone: assume it was, and choose them."""
    extended = strategy.extended
    return type(extended) is mirrored_strategy.MirroredExtended and \
        extended._cross_device_ops is extended._collective_ops


def resource_apply_dense(optimizer, gradient, handle):
    """A v1 optimizer's dense update of a resource variable (Optimizer._resource_apply_dense): sparse Adam updates
    through its fused dense kernel. If gone: leave sparse updates unfused (RunConfig(fuse_sparse_updates=False))."""
    return optimizer._resource_apply_dense(gradient, handle)


def set_steps_per_run(hook, steps: int) -> None:
    """Tells a CheckpointSaverHook how many steps one session call runs (_set_steps_per_run). If gone: the hook's
    timer then counts calls; run one step per call where a hook counts steps."""
    hook._set_steps_per_run(steps)


def timer_every_steps(hook) -> int | None:
    """How many steps apart a timed hook acts (SecondOrStepTimer._every_steps of its _timer), None when it counts
    seconds. If gone: every call of such a hook runs one step."""
    return getattr(hook._timer, "_every_steps", None) or None


def timer_last_triggered_step(hook) -> int | None:
    """The step a timed hook last acted at (its _timer's last_triggered_step()). If gone: as timer_every_steps."""
    return hook._timer.last_triggered_step()


def writes_graph_def(writer) -> bool:
    """Whether a summary writer can be given a GraphDef made already (FileWriter._write_plugin_assets and
    _add_graph_def); where it cannot, the writer's own add_graph serializes the graph again."""
    return hasattr(writer, "_write_plugin_assets") and hasattr(writer, "_add_graph_def")


def add_graph_def(writer, graph, graph_def) -> None:
    """What FileWriter.add_graph writes, from a GraphDef made already. If gone: writer.add_graph(graph)."""
    writer._write_plugin_assets(graph)
    writer._add_graph_def(graph_def)


def keras_variable_value(variable):
    """The tf.Variable inside a Keras 3 variable (keras.Variable._value), None before it is built. If gone: the
    Keras 3 regularization check finds no weights and checks nothing."""
    return getattr(variable, "_value", None)


def tf_keras_seed_generators():
    """tf_keras's per-thread source of seeds (backend._SEED_GENERATOR), saved and restored around a seeded graph.
    If gone: tf_keras.utils.set_random_seed alone (a program's later unseeded Keras weights then differ)."""
    from tf_keras.src import backend  # tf_keras is imported only where a program uses it

    return backend._SEED_GENERATOR


__all__ = [
    "MODULES", "HookedSession", "MonitoredSessionBase", "CoordinatedSessionCreator", "start_monitored_session",
    "op_id", "made_by_gradients",
    "unfinalize",
    "session_closed", "do_call", "make_callable_now", "add_control_input", "set_attr", "control_flow_context",
    "in_multi_worker_mode", "update_config_proto", "scale_loss_for_estimator", "on_default_cross_device_ops",
    "resource_apply_dense", "set_steps_per_run", "timer_every_steps", "timer_last_triggered_step",
    "writes_graph_def", "add_graph_def", "keras_variable_value", "tf_keras_seed_generators",
    "cross_device_ops", "mirrored_strategy", "context", "meta_graph", "op_def_registry", "file_io",
    "control_flow_ops", "monitored_session", "deprecation",
]
