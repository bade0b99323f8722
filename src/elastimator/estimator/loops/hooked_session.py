"""The monitored session the verbs run in: TensorFlow's, with each call's fetch plan kept and reused.

Every call of a `MonitoredSession` merges the caller's fetches with what each
hook's `before_run` asks for and hands the merged structure to `Session.run`,
which works out afresh which tensors and ops that structure names and how to
rebuild it from their values: with one training step per call, a large share of
a step's Python (docs/performance.md, "Costs behind the engine's choices").

The merged structure is nearly always one of a few shapes (the same hooks ask
for the same tensors, a summary or a trace every so many steps), so
`ReusingHookedSession` keys each call's structure by its containers and the
identity of its tensors and ops, and runs a seen shape through the
`Session.make_callable` made for it the first time. Everything a hook sees is
unchanged: `before_run` and `after_run` are called in the same order with the
same `SessionRunContext` and `SessionRunValues`, results have the containers
the hook asked for, run options (a trace a hook requests) and run metadata go
through the callable, and an op's failure raises the error `Session.run` raises.
A call with feeds, or with a fetch that is not a tensor, op, variable or name,
takes `Session.run` as before.
"""

from __future__ import annotations

import tensorflow as tf

from elastimator import tensorflow_import
from elastimator.estimator import tf_internals

_LEAVES = (tf.Tensor, tf.Operation, tf.Variable)
MAX_PLANS = 64
"""The most call shapes kept per session; past it the kept ones are dropped and made again on use."""


def fetch_shape(fetches):
    """A hashable key that is equal for two fetch structures `Session.run` treats alike, or None when a part of
    them is not a container, tensor, op, variable or name (such structures are not reused)."""
    if isinstance(fetches, _LEAVES):
        return id(fetches)
    if isinstance(fetches, str):
        return ("name", fetches)
    if isinstance(fetches, (list, tuple)):
        parts = tuple(fetch_shape(f) for f in fetches)
        return None if None in parts else (type(fetches), parts)
    if isinstance(fetches, dict):
        parts = tuple((key, fetch_shape(value)) for key, value in fetches.items())
        return None if any(shape is None for _, shape in parts) else (type(fetches), parts)
    return None


class ReusingHookedSession(tf_internals.HookedSession):
    """TensorFlow's hooked session, running each merged fetch structure it has seen through a kept callable."""

    def __init__(self, sess, hooks, leave_open: bool = False):
        super().__init__(sess, hooks)
        self._plans: dict = {}
        self._graph_version = None
        self._leave_open = leave_open

    def close(self):
        if self._leave_open:  # the raw session is its creator's to keep or close (kept_training)
            self._sess = None
            return
        super().close()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        actual_fetches = {"caller": fetches}
        run_context = tf.compat.v1.train.SessionRunContext(
            original_args=tf.compat.v1.train.SessionRunArgs(fetches, feed_dict), session=self._sess)
        options = options or tf.compat.v1.RunOptions()
        feed_dict = self._call_hook_before_run(run_context, actual_fetches, feed_dict, options)
        run_metadata = run_metadata or tf.compat.v1.RunMetadata()
        outputs = self._run_merged(actual_fetches, feed_dict, options, run_metadata)
        for hook in self._hooks:
            hook.after_run(run_context, tf.compat.v1.train.SessionRunValues(
                results=outputs[hook] if hook in outputs else None, options=options, run_metadata=run_metadata))
        self._should_stop = self._should_stop or run_context.stop_requested
        return outputs["caller"]

    def _run_merged(self, fetches: dict, feed_dict, options, run_metadata):
        shape = None if feed_dict else fetch_shape(fetches)
        if shape is None:
            return self._sess.run(fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata)
        graph = self._sess.graph
        if graph.version != self._graph_version:  # ops were added since the callables were made
            self._plans.clear()
            self._graph_version = graph.version
        plan = self._plans.get(shape)
        if plan is None:
            if len(self._plans) >= MAX_PLANS:
                self._plans.clear()
            # The structure is kept with its callable: its tensors stay alive, so their ids in `shape` stay theirs.
            plan = self._plans[shape] = (self._sess.make_callable(fetches, accept_options=True), fetches)
        # _do_call gives an op's failure the message and node Session.run gives it.
        return tf_internals.do_call(self._sess, plan[0], options, run_metadata)


class _ReusingSessionCreator(tf_internals.CoordinatedSessionCreator):
    def create_session(self):
        coordinated = super().create_session()
        # The coordinated session wraps a fresh hooked session that has run nothing yet; ours takes its place. A
        # creator that `leaves_sessions_open` keeps or closes the raw sessions it made itself.
        leave_open = getattr(self._session_creator, "leaves_sessions_open", False)
        coordinated._sess = ReusingHookedSession(self.tf_sess, self._hooks, leave_open)  # pylint: disable=protected-access
        return coordinated


class ReusingMonitoredSession(tf_internals.MonitoredSessionBase):
    """`tf.compat.v1.train.MonitoredSession` whose calls reuse their fetch plans (`ReusingHookedSession`).

    Args:
        session_creator: Makes the raw session (and makes it again after a recoverable error).
        hooks: The SessionRunHooks, in the order they are called.
        should_recover: Whether an AbortedError or UnavailableError re-creates the session (TensorFlow's
            MonitoredSession) or ends the session with that error (a strategy over several processes, where a
            re-created session would wait on collectives forever).
        hooks_begun: The caller has called each hook's `begin` (training: to see what they added to the graph
            before a kept session is handed over); the session is made over them as they are.
    """

    _CoordinatedSessionCreator = _ReusingSessionCreator

    def __init__(self, session_creator, hooks, should_recover: bool = True, hooks_begun: bool = False):
        with tensorflow_import.quiet_first_session():
            if hooks_begun:
                tf_internals.start_monitored_session(self, session_creator, hooks, should_recover)
            else:
                super().__init__(session_creator, hooks, should_recover=should_recover)
