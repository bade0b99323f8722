"""One verb's graph and session, kept between its calls: its life stage, what its calls run, its background work.

A `KeptGraph` is the only writer of its fields. Its life, as its `Stage`:

    (made by a call) -> IN_USE -> IDLE -> IN_USE -> ... -> CLOSED
                                    \\-> RESTING -> IN_USE (a training graph's session closed and made anew)

- IN_USE: a call runs in it. `WarmGraphs.take` hands it to one call at a time.
- IDLE: kept for the next call; the input the last call used up is freed in the background meanwhile
  (`background`), and `take` waits for that.
- RESTING: training's, kept without a session while another verb opens its own (`rest`); the next train call
  makes a session anew and restores into it.
- CLOSED: its session closed for good, after a failed call or input, or when replaced.

What each verb runs from it is a typed payload: `Served` for evaluation and prediction (callables made with the
session), `TrainingParts` for training (the step and scaffold the monitored session runs).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from concurrent import futures
from typing import Any, Callable, Mapping

import tensorflow as tf

from elastimator.estimator import log_lines
from elastimator.estimator import tf_internals
from elastimator.estimator.graph import model_graph
from elastimator.estimator.loops import background, call_plan
from elastimator.estimator.saving import checkpoints

logger = logging.getLogger("elastimator")


class Stage(enum.Enum):
    IN_USE = "in use"
    IDLE = "idle"
    RESTING = "resting"
    CLOSED = "closed"


_UNBUILT = object()


@dataclasses.dataclass(eq=False)
class Served:
    """What an evaluation's or prediction's calls run in a kept graph."""

    fetches: Mapping[str, Any]
    """What every call runs, by name ("batch"; an evaluation's "results")."""
    runs: Mapping[str, Callable]
    """The session's callables of `fetches`, by the same names."""
    writes_model: bool
    """Whether running `fetches` may change a global variable (then every call restores its checkpoint)."""
    batches_run: int = 0
    """An evaluation's batches over all its calls (multi_batch builds its loop past a few hundred)."""
    _several: Any = _UNBUILT

    def several(self, make: Callable[[], Callable | None]) -> Callable | None:
        """The callable that runs several batches in one session call, made by `make` on first use (None where it
        cannot be)."""
        if self._several is _UNBUILT:
            self._several = make()
        return self._several

    def ran(self, batches: int) -> None:
        self.batches_run += batches


@dataclasses.dataclass(eq=False)
class TrainingParts:
    """What a training graph's calls run, besides its session."""

    built: model_graph.ModelGraph
    step: Any
    """The `TrainingStep` the session calls run."""
    execution: Any
    """The several-step `multi_step.Execution`, or None for one step per call."""
    scaffold: tf.compat.v1.train.Scaffold
    step_not_copyable: Any = _UNBUILT
    """Why the step cannot be copied into a loop of steps (None: it can), once asked (`not_copyable`)."""

    def not_copyable(self, check: Callable[[], str | None]) -> str | None:
        """Why the step cannot be looped, as `check` says the first time it is asked (the step does not change)."""
        if self.step_not_copyable is _UNBUILT:
            self.step_not_copyable = check()
        return self.step_not_copyable


class KeptGraph:
    """A verb's graph and session kept for its next call (see the module doc).

    Args:
        mode: The verb (ModeKeys value).
        key: What it was built from (`warm_graphs.Reuse.key`).
        graph: The graph, finalized.
        session: Its session, readied for the call that made it.
        iterator: The input iterator the model reads; each call starts it on that call's dataset.
        saver: Restores the checkpoint a call asks for.
        release: Starts the iterator on nothing, freeing the dataset a call used up.
        payload: What the verb's calls run (`Served`, `TrainingParts`).
        restored: The stamp of the checkpoint the session holds (`CheckpointDir.stamp`), None if none known.
        reset: Initializes the local variables (the metrics' totals) again; training's is made on first reuse.
    """

    def __init__(self, *, mode: str, key: tuple, graph: tf.Graph, session: tf.compat.v1.Session, iterator: Any,
                 saver, release: tf.Operation, payload: Served | TrainingParts, restored: tuple | None,
                 reset: tf.Operation | None = None):
        self.mode, self.key, self.graph, self.iterator, self.saver, self.payload = (
            mode, key, graph, iterator, saver, payload)
        self._session: tf.compat.v1.Session | None = session
        self._release, self._reset, self._restored = release, reset, restored
        self._stage = Stage.IN_USE
        self._calls = 1
        self._pending: futures.Future | None = None
        """The last background work on it (freeing its input, closing its session)."""
        self._input_freed = True

    @property
    def stage(self) -> Stage:
        return self._stage

    @property
    def session(self) -> tf.compat.v1.Session | None:
        return self._session

    @property
    def calls(self) -> int:
        return self._calls

    def facts(self, same_key: bool) -> call_plan.KeptFacts:
        """What `call_plan.reuse` weighs; for a graph the call may take, once its background work is done."""
        if not same_key:
            return call_plan.KeptFacts(same_key=False, calls=self._calls)
        self._settle()
        return call_plan.KeptFacts(same_key=same_key, calls=self._calls, usable=self._input_freed,
                                   session_closed=self._session is not None
                                   and tf_internals.session_closed(self._session))

    def taken(self) -> None:
        """IDLE or RESTING -> IN_USE: a call runs in it (and is counted)."""
        self._settle()
        self._expect(Stage.IDLE, Stage.RESTING)
        self._stage = Stage.IN_USE
        self._calls += 1

    def with_input(self, build: Callable[[], tf.Operation | None], *, keep_open: bool = False) -> tf.Operation | None:
        """Runs `build` (which adds the call's input to the graph) with the graph open, then finalizes it again;
        with `keep_open` (training's: the call's hooks join it too, and its scaffold finalizes it as the session is
        made), only where `build` fails or declines (None)."""
        tf_internals.unfinalize(self.graph)
        started = None
        try:
            started = build()
            return started
        finally:
            if started is None or not keep_open:
                self.graph.finalize()

    def releases_with(self, release: tf.Operation) -> None:
        """The op that frees the dataset this call runs (built with its input)."""
        self._release = release

    def restore(self, checkpoint: str, *, changed_since: bool) -> None:
        """Restores `checkpoint` into the session unless it holds it unchanged (`call_plan.restore`)."""
        wanted = checkpoints.CheckpointDir.stamp(checkpoint)
        decision = call_plan.restore(wanted=wanted, held=self._restored, changed_since=changed_since)
        logger.debug("%s %s %s: %s", self.mode, "restores" if decision else "does not restore", checkpoint,
                     decision.reason)
        if decision:
            self._restored = None
            with self.graph.as_default():  # (outside a graph, a Saver restores eagerly)
                self.saver.restore(self._session, checkpoint)
            self._restored = wanted

    def begin(self, started: tf.Operation | None) -> None:
        """Readies the call: the local variables initialized again (the metrics' totals, as in a fresh session)
        and, given, the input started."""
        ops = [self._reset] + ([started] if started is not None else [])
        with log_lines.running_local_init_op():
            self._session.run(ops)

    def ensure_reset(self) -> None:
        """Training's: builds the op that initializes the local variables again (the graph open for the call)."""
        if self._reset is None:
            with self.graph.as_default():
                self._reset = tf.compat.v1.local_variables_initializer()

    def holds(self, session: tf.compat.v1.Session, restored: tuple | None) -> None:
        """Training's, as its call ends: the session it ran in (made anew after an error, or for a resting graph)
        and the stamp of the checkpoint that session holds (None: the next call restores)."""
        if self._session is not None and self._session is not session:
            self._session.close()
        self._session, self._restored = session, restored

    def idle(self, *, free_now: bool = False) -> None:
        """IN_USE -> IDLE: the call is done; its input is freed in the background (or now, with `free_now`)."""
        self._expect(Stage.IN_USE)
        self._stage = Stage.IDLE
        session = self._session
        if free_now:
            self._free_input(session)
        else:
            self._pending = background.submit(lambda: self._free_input(session), after=self._pending)

    def rest(self) -> None:
        """IDLE -> RESTING: closes the session in the background (after its input is freed), keeping the graph."""
        self._expect(Stage.IDLE)
        self._stage = Stage.RESTING
        session, self._session, self._restored = self._session, None, None
        if session is not None:
            self._pending = background.submit(session.close, after=self._pending)

    def close(self) -> None:
        """Any stage -> CLOSED: the session closed once its background work is done."""
        self._settle()
        self._stage = Stage.CLOSED
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def _free_input(self, session: tf.compat.v1.Session | None) -> None:
        if session is None:
            return
        try:
            session.run(self._release)
        except Exception:  # noqa: BLE001 - a session that cannot free its input is not used again
            self._input_freed = False

    def _settle(self) -> None:
        """Waits for its background work."""
        if self._pending is not None:
            futures.wait([self._pending])
            self._pending = None

    def _expect(self, *stages: Stage) -> None:
        if self._stage not in stages:
            raise RuntimeError(f"kept {self.mode} graph: expected stage {' or '.join(s.value for s in stages)}, "
                               f"it is {self._stage.value}")
