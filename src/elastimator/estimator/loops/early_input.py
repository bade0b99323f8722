"""A kept graph's session made as soon as its input is built, starting the input while model_fn builds the model.

Starting a dataset's iterator (tf.data's rewrites of the dataset, its
functions instantiated, the first elements read ahead) took 25-35 ms of a
DeepFM's first `evaluate` or `predict` (bench/results/frameworks.md's model),
after the model was built; its model_fn is ~80 ms of Python. `EarlyInput`
makes the session the graph will be kept with when `input_fn` returns
(`model_graph.build(on_input=...)`), and runs the iterator's initializer on a
thread: TensorFlow runs it without the GIL, beside model_fn.

Only an input that runs no Python of the program's starts early (no
`py_function`, `numpy_function` or `from_generator` in the graph's functions
or ops): where the call then does not keep the graph (a hook or scaffold of
the model's, `warm_graphs.Reuse.keep`), this session is closed and the call's
own session starts the input from its beginning, as it did before, with
nothing of the program's run twice. Nor does an input that made a table or
variable (a vocabulary looked up in its pipeline): those are initialized with
the model's local state, once the model is built, and the input starts after.
"""

from __future__ import annotations

import threading
from concurrent import futures

import tensorflow as tf

from elastimator import tensorflow_import
from elastimator.estimator.graph import calls, state_updates
from elastimator.inputs import python_source


class EarlyInput:
    """The session of a graph being built for keeping, once its input has started (`on_input`)."""

    def __init__(self, master: str, session_config):
        self._master, self._session_config = master, session_config
        self._session: tf.compat.v1.Session | None = None
        self._iterator = None
        self._started: futures.Future | None = None

    def on_input(self, result: calls.InputResult) -> None:
        """Makes the session and starts the input on a thread, where the input is one dataset's iterator that runs
        no Python, in a local session."""
        hooks = result.hooks
        if self._master or not calls.plain_dataset(hooks) or state_updates.reads_state(hooks[0].iterator.initializer):
            return
        graph = tf.compat.v1.get_default_graph()
        if python_source.calls_python(graph):
            return
        with tensorflow_import.quiet_first_session():
            self._session = tf.compat.v1.Session(self._master, graph=graph, config=self._session_config)
        self._iterator = hooks[0].iterator
        pool = futures.ThreadPoolExecutor(1, thread_name_prefix="elastimator-early-input")
        self._started = pool.submit(self._session.run, self._iterator.initializer)
        pool.shutdown(wait=False)

    def take(self, iterator) -> tuple[tf.compat.v1.Session | None, bool]:
        """(the session, whether it started `iterator`), handed to the caller to keep; (None, False) where none was
        made. A start that failed is left to the caller to run again (it raises there as it would have)."""
        session, self._session = self._session, None
        if session is None or iterator is not self._iterator:
            _close_when_started(session, self._started)
            return None, False
        return session, self._started.exception() is None

    def close(self) -> None:
        """Closes a session nobody took, once its start is done (on a thread: a started input can take a while to
        free)."""
        session, self._session = self._session, None
        _close_when_started(session, self._started)


def _close_when_started(session, started: futures.Future | None) -> None:
    if session is None:
        return

    def close() -> None:
        futures.wait([started])
        session.close()

    threading.Thread(target=close, name="elastimator-close-early-input").start()
