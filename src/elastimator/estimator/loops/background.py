"""The engine's background work: what kept graphs do beside the program, on one executor.

A kept graph's session works while the program goes on: it frees the input a
call used up (TensorFlow's exhausted iterator is slow to reset, docs/performance.md),
closes a training session beside another verb's build, and makes a new
session's callables while its checkpoint is restored. Each runs on the threads
of one executor, made on first use; work on one graph is ordered by passing the
future of the work before it (`after`).
"""

from __future__ import annotations

import os
import threading
from concurrent import futures
from typing import Callable

WORKERS = 4
"""At most this many pieces of background work run at once (a few kept graphs, each with one at a time)."""

_lock = threading.Lock()
_executor: futures.ThreadPoolExecutor | None = None


def submit(work: Callable[[], object], after: futures.Future | None = None) -> futures.Future:
    """Runs `work` in the background once `after` (the same graph's earlier work) is done; its future.

    Work is taken in the order it was submitted, so the work `after` names has a thread before `work` waits for
    it. Where no thread can start any more (the interpreter shutting down), `work` runs now, in the caller's.
    """
    def ordered():
        if after is not None:
            futures.wait([after])
        return work()

    try:
        return _pool().submit(ordered)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
        done: futures.Future = futures.Future()
        try:
            done.set_result(ordered())
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits, as the pool would
            done.set_exception(error)
        return done


def _pool() -> futures.ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="elastimator")
        return _executor


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads: it makes its own executor on first use."""
    global _executor, _lock
    _executor, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)
