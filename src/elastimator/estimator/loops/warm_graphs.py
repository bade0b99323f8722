"""Evaluation and prediction graphs kept between calls.

tf.estimator built a fresh graph and session for every `evaluate` and `predict`
call: input_fn, model_fn, the scaffold's savers and checks, a session, a restore.
For a DeepFM that is most of a 50-batch call (bench/results/frameworks.md), paid
again by every evaluation of `train_and_evaluate` and every scoring call.

Here the first call of a mode keeps its graph and session (`WarmGraph`). A later
call of that mode, where nothing the model is built from changed, reuses them:

- `input_fn` is called again, every call, as before (a glob of new files, a
  Python-side choice of data, all as in tf.estimator); its dataset starts the
  kept iterator when it yields exactly what the first one did (`element_spec`).
- `model_fn` is not called again: the model was built from the same features,
  labels, mode, params (equal) and config (the same object).
- The checkpoint is restored into the kept session at every call (the newest,
  or the one asked for), and the local variables (metrics) are reset.
- What each call runs (a batch, an evaluation's results) goes through a
  callable made once with the session (`WarmGraph.runs`), whose executors
  TensorFlow builds as it is made (`callables.made_now`): the first call makes
  them on a thread while the checkpoint is restored, not inside its first
  batch.

No session sees a graph before it is whole. TensorFlow marks an op that becomes
another's control input (`tf.group`, `tf.control_dependencies`) by setting an
attribute on it; where a session has already run the op, that is a mutation
TensorFlow warns about (`c_api.cc: ... was changed by setting attribute after it
was run by a session`) and will refuse. A kept graph's scaffold, resets and
input release are built, and the graph finalized, before its session is made;
a later call adds only its input pipeline's new ops.

Only graphs whose calls would behave the same are kept: no hooks (the caller's,
the spec's or an input's other than the dataset's own), no scaffold of the
model's, an input that reads no table or variable its input_fn made (the next
call's input_fn makes another, which nothing would initialize), one device and
a local session, a checkpoint to restore, an estimator
whose graphs come from its `model_fn` (a subclass that builds them through
`_call_model_fn`, as AdaNet does, builds afresh), and, when `tf_random_seed` is
set, no stateful random op among what the calls run (a fresh graph would draw
the same numbers every call). Anything else runs as tf.estimator ran it.
`RunConfig(reuse_graphs=False)` turns it off.

Which calls reuse and keep is decided by `call_plan`, from facts gathered
here. A kept graph grows by each call's input pipeline, so it is rebuilt after
`call_plan.MAX_CALLS` calls. Two calls at once (two `predict` generators read in turn) do
not share it: the second builds its own graph, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from concurrent import futures
from typing import Any, Callable, Iterable, Iterator, Mapping

import tensorflow as tf

from elastimator import tensorflow_import
from elastimator.estimator import log_lines
from elastimator.estimator import tf_internals
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.run_config import RunConfig
from elastimator.estimator.graph import calls, model_graph, state_updates
from elastimator.estimator.loops import call_plan, callables
from elastimator.estimator.saving import checkpoints

logger = logging.getLogger("elastimator")


@dataclasses.dataclass(eq=False)
class WarmGraph:
    """A mode's graph and session, kept for the next call."""

    mode: str
    key: tuple
    graph: tf.Graph
    session: tf.compat.v1.Session | None
    """None once `WarmGraphs.rest` closed it (a training graph's: its next call makes a session anew)."""
    iterator: Any
    """The input iterator the model reads from; each call starts it on that call's dataset."""
    saver: tf.compat.v1.train.Saver
    reset: tf.Operation | None
    """Initializes the local variables (the metrics' totals) again (a training graph makes it on its first reuse)."""
    release: tf.Operation
    """Starts the iterator on nothing (the call's dataset taking 0 elements), freeing the one a call used up."""
    fetches: dict[str, Any]
    """What every call runs, by the verb's name for each (`Reuse.keep`)."""
    runs: dict[str, Callable | None]
    """The session's callables of `fetches`, by the same names; an evaluation adds its loop of several batches
    ("batches") once built, None where it cannot be."""
    writes_model: bool
    """Whether running `fetches` may change a global variable (then every call restores its checkpoint)."""
    restored: tuple | None = None
    """The checkpoint the session holds, as `stamp` saw it."""
    calls: int = 1
    freeing: threading.Thread | None = None
    """Frees the iterator the last call used up (`WarmGraphs.give_back`); the next call waits for it."""
    usable: bool = True
    """False once freeing the iterator failed: the graph is then closed instead of used."""
    batches_run: int = 0
    """An evaluation graph's batches over all its calls (multi_batch builds its loop past a few hundred)."""
    parts: Any = None
    """What else a mode's calls run from it (training's step and scaffold: `kept_training.TrainingParts`)."""

    def close(self) -> None:
        """Closes the session, once the iterator is freed."""
        if self.freeing is not None:
            self.freeing.join()
            self.freeing = None
        if self.session is not None:
            self.session.close()

    def free_input(self) -> None:
        if self.session is None:
            return
        try:
            self.session.run(self.release)
        except Exception:  # noqa: BLE001 - a session that cannot free its input is not used again
            self.usable = False


class WarmGraphs:
    """An Estimator's kept graphs, one per mode."""

    def __init__(self):
        self._kept: dict[str, WarmGraph] = {}
        self._lock = threading.RLock()

    def __reduce__(self):  # a copied (or pickled) Estimator starts with no kept graphs: sessions do not copy
        return (WarmGraphs, ())

    def take(self, mode: str, key: tuple) -> WarmGraph | None:
        """The kept graph of `mode` if it was built under `key`, is free, and may serve another call
        (`call_plan.reuse`); the caller gives it back."""
        with self._lock:
            warm = self._kept.get(mode)
            same = warm is not None and _same(warm.key, key)
            if same:
                del self._kept[mode]
        kept = None
        if warm is not None:
            if same and warm.freeing is not None:
                warm.freeing.join()
                warm.freeing = None
            kept = call_plan.KeptFacts(same_key=same, calls=warm.calls, usable=warm.usable,
                                       session_closed=warm.session is not None and _closed(warm.session))
        decision = call_plan.reuse(kept)
        if not decision:
            logger.debug("%s builds its graph afresh: %s", mode, decision.reason)
            if same:
                warm.close()
            return None
        return warm

    def give_back(self, warm: WarmGraph, *, free_now: bool = False) -> None:
        """Keeps `warm` for the next call of its mode (closing the one it replaces), freeing the iterator the call
        used up on a thread of its own, which the next call waits for (or now, with `free_now`).

        Freeing an exhausted iterator (TensorFlow's, as its session runs the next initializer) can take long,
        the more so when left to the next call's start after a `train` (docs/performance.md, "Costs behind the engine's choices"). The session runs it without the
        GIL, beside the program.
        """
        if free_now:
            warm.free_input()
        else:
            warm.freeing = threading.Thread(target=warm.free_input, name="elastimator-free-input")
            warm.freeing.start()
        with self._lock:
            replaced = self._kept.get(warm.mode)
            self._kept[warm.mode] = warm
        if replaced is not None and replaced is not warm:
            replaced.close()

    @contextlib.contextmanager
    def in_use(self, warm: WarmGraph) -> Iterator[WarmGraph]:
        """A call's use of `warm`: given back when the call ends or its caller stops reading early (a generator
        closed), closed when the call fails.

        A generator left unfinished in a reference cycle is closed by the garbage collector, which may run inside
        a lock of `threading`'s (a `Thread.join()` that allocates): a thread started there would wait for that
        lock forever, so an early stop frees its input in the closing thread. For the same reason `_lock` is
        reentrant, and `take` checks that the graph's session is still open (`_closed`).
        """
        try:
            yield warm
        except GeneratorExit:
            self.give_back(warm, free_now=True)
            raise
        except BaseException:
            warm.close()
            raise
        self.give_back(warm)

    def rest(self, mode: str) -> None:
        """Closes the session of `mode`'s kept graph, keeping the graph for the next call (which opens a session
        anew and restores the newest checkpoint into it).

        Used for training's: another verb is about to open a session of its own, beside which a kept training
        session would hold the model and its optimizer's slots in memory (tf.estimator closed it as each train
        call ended) (docs/performance.md, "Costs behind the engine's choices").
        """
        with self._lock:
            warm = self._kept.pop(mode, None)
        if warm is None:
            return
        if warm.session is not None:
            # Closed on a thread of its own, as the verb builds its graph: freeing the input first, the close can
            # take long (`give_back`). The next call of `mode` waits for it (`take`).
            warm.freeing = threading.Thread(target=_close_after, args=(warm.session, warm.freeing),
                                            name="elastimator-close-session")
            warm.freeing.start()
            warm.session, warm.restored = None, None
        self._put_back(warm)

    def _put_back(self, warm: WarmGraph) -> None:
        """Keeps `warm` again unless a call gave back another meanwhile."""
        with self._lock:
            self._kept.setdefault(warm.mode, warm)

    def close(self) -> None:
        """Closes every kept session."""
        with self._lock:
            kept, self._kept = list(self._kept.values()), {}
        for warm in kept:
            warm.close()


@dataclasses.dataclass(frozen=True)
class Reuse:
    """What one call of a verb may reuse (`warm`) or keep for the next call (`keep`)."""

    graphs: WarmGraphs
    estimator: Any
    mode: str
    key: tuple
    """What the kept graph was built from: the model_fn, params (a copy), config, and the verb's own (`reuse_for`)."""

    def warm(self, input_fn: Callable, checkpoint: str,
             on_start: Callable[[], None] | None = None) -> WarmGraph | None:
        """The kept graph of this call's mode, readied for it (`start`), or None where the call builds afresh.
        `on_start` is called once its input is known to fit, before the checkpoint is restored."""
        warm = self.graphs.take(self.mode, self.key)
        if warm is not None and _start(warm, self.estimator, input_fn, checkpoint, on_start):
            return warm
        return None

    def keep(self, built, scaffold, checkpoint: str, master: str, fetches: Mapping[str, Any],
             other_hooks: Iterable) -> WarmGraph | None:
        """Keeps the graph a call just built (no session made on it yet), if the next call can reuse it: the graph
        completed and finalized, its session made, the checkpoint restored, the input started, and a callable made
        of each of `fetches` (name -> what every call runs). None where it cannot; the call then runs it as 2.15
        did.

        `scaffold` is `sessions.make_scaffold(..., ready_once_made=True)`'s: a kept graph has no scaffold of the
        model's, so its readiness checks are left out wherever they cannot fail.
        """
        reached = reach(fetches)
        decision = call_plan.keep(self.mode, _graph_facts(built, other_hooks, master, reached,
                                                          self.estimator.config.tf_random_seed))
        if not decision:
            logger.debug("%s keeps nothing: %s", self.mode, decision.reason)
            return None
        graph = tf.compat.v1.get_default_graph()
        reset = tf.compat.v1.local_variables_initializer()
        iterator = built.input_hooks[0].iterator
        release = calls.start_on(iterator, built.input_hooks[0].dataset.take(0))
        scaffold.finalize()  # the saver and init ops: the graph's last ops, and it is finalized
        with tensorflow_import.quiet_first_session():
            session = tf.compat.v1.Session(master, graph=graph, config=self.estimator.config.effective_session_config())
        runs = _open(session, scaffold, checkpoint, iterator.initializer, fetches)
        return WarmGraph(mode=self.mode, key=self.key, graph=graph, session=session, iterator=iterator,
                         saver=scaffold.saver, reset=reset, release=release, fetches=dict(fetches), runs=runs,
                         writes_model=reached.writes_model, restored=checkpoints.CheckpointDir.stamp(checkpoint))


def _open(session: tf.compat.v1.Session, scaffold, checkpoint: str, start_input: tf.Operation,
          fetches: Mapping[str, Any]) -> dict[str, Callable]:
    """Readies a kept graph's new session, on its finalized graph, as TensorFlow's ChiefSessionCreator would for a
    scaffold of elastimator's alone (`keep`): the checkpoint restored, then the local variables initialized and
    the input started. Returns the callables of `fetches`, which a thread makes meanwhile
    (`callables.made_now`)."""
    with futures.ThreadPoolExecutor(1, thread_name_prefix="elastimator-callables") as pool:
        made = pool.submit(lambda: {name: callables.made_now(session, what) for name, what in fetches.items()})
        try:
            scaffold.saver.restore(session, checkpoint)
            with log_lines.running_local_init_op():
                session.run([scaffold.local_init_op, start_input])
            return made.result()
        except BaseException:
            futures.wait([made])  # nothing is made in the session as it closes
            session.close()
            raise


def rest_training(estimator) -> None:
    """Closes the session of `estimator`'s kept training graph, if any (`WarmGraphs.rest`): called by the verbs
    that open a session of their own (evaluate, predict, export)."""
    graphs = getattr(estimator, "_warm_graphs", None)
    if graphs is not None:
        graphs.rest(ModeKeys.TRAIN)


def reuse_for(estimator, mode: str, hooks: Iterable, checkpoint: str | None, *extra) -> Reuse | None:
    """What an evaluation or prediction call may reuse or keep, or None where it builds afresh and keeps nothing
    (`call_plan.consider`). `extra` is what else the graph depends on (predict_keys)."""
    return reuse_of(estimator, call_facts(estimator, mode, caller_hooks=bool(list(hooks)),
                                          checkpoint=bool(checkpoint)), *extra)


def call_facts(estimator, mode: str, **facts) -> call_plan.CallFacts:
    """A call's `call_plan.CallFacts`: the estimator's, with the call's own `facts`."""
    return call_plan.CallFacts(verb=mode, reuse_graphs=estimator.config.reuse_graphs,
                               through_call_model_fn=model_graph.model_fn_of(estimator) is not estimator.model_fn,
                               **facts)


def reuse_of(estimator, call: call_plan.CallFacts, *extra) -> Reuse | None:
    """What a call may reuse or keep, or None where `call_plan.consider` rules it out."""
    graphs = getattr(estimator, "_warm_graphs", None)
    decision = call_plan.consider(call)
    if graphs is None or not decision:
        logger.debug("%s builds its graph afresh and keeps nothing: %s", call.verb,
                     decision.reason if graphs is not None else "the estimator keeps no graphs")
        return None
    mode = call.verb
    key = (estimator.model_fn, estimator._params_for(mode), estimator.config, *extra)  # pylint: disable=protected-access
    return Reuse(graphs=graphs, estimator=estimator, mode=mode, key=key)


def batches(warm: WarmGraph, name: str) -> Iterator:
    """Runs the callable `name` of a readied kept graph until its input ends, yielding each result."""
    run = warm.runs[name]
    while True:
        try:
            result = run()
        except tf.errors.OutOfRangeError:
            return
        yield result


def input_begin(warm: WarmGraph, estimator, input_fn: Callable) -> tf.Operation | None:
    """Calls `input_fn` in `warm`'s graph (the caller has opened it) as a fresh graph of its mode would call it:
    what starts the kept iterator on its dataset, or None when that yields something else than the kept one did
    or reads a table or variable it made (`state_updates.reads_state`). `warm.release` then frees that dataset."""
    config = estimator.config
    with warm.graph.as_default(), model_graph.seeded(config.tf_random_seed):
        result = calls.input_fn_result(input_fn, warm.mode, estimator._params_for(warm.mode), config)  # pylint: disable=protected-access
        if not (isinstance(result, tf.data.Dataset) and result.element_spec == warm.iterator.element_spec):
            return None
        begin = calls.start_on(warm.iterator, result)
        if state_updates.reads_state(begin):
            return None
        warm.release = calls.start_on(warm.iterator, result.take(0))
        return begin


def _start(warm: WarmGraph, estimator, input_fn: Callable, checkpoint: str,
           on_start: Callable[[], None] | None = None) -> bool:
    """Readies `warm` for a call: calls `input_fn` in its graph, restores `checkpoint` (unless the session holds
    it unchanged and the calls change no model variable), resets the metrics and starts the input. False (the
    graph then closed) when the input yields something else than the kept one did."""
    graph = warm.graph
    try:
        tf_internals.unfinalize(graph)  # the call's input pipeline joins the graph
        try:
            begin = input_begin(warm, estimator, input_fn)
        finally:
            graph.finalize()
        if begin is None:
            warm.close()
            return False
        if on_start is not None:
            on_start()
        stamped = checkpoints.CheckpointDir.stamp(checkpoint)
        if warm.writes_model or stamped != warm.restored:
            warm.restored = None
            with graph.as_default():  # (outside a graph, a Saver restores eagerly)
                warm.saver.restore(warm.session, checkpoint)
            warm.restored = stamped
        with log_lines.running_local_init_op():  # the metrics' totals reset, as a fresh session's local init
            warm.session.run([warm.reset, begin])
    except BaseException:
        warm.close()
        raise
    warm.calls += 1
    return True


def _close_after(session: tf.compat.v1.Session, freeing: threading.Thread | None) -> None:
    """Closes `session` once `freeing` (what frees its input) is done."""
    if freeing is not None:
        freeing.join()
    session.close()


def _closed(session: tf.compat.v1.Session) -> bool:
    """Whether `session` was closed. A prediction generator the garbage collector closes is collected with its
    kept graph's session, whose own finalizer may close it before or after the generator gives the graph back."""
    return tf_internals.session_closed(session)


def _graph_facts(built, other_hooks: Iterable, master: str, reached: "_Reach", seed) -> call_plan.GraphFacts:
    """An evaluation's or prediction's graph, as `call_plan.keep` weighs it."""
    plain = plain_input(built)
    return call_plan.GraphFacts(
        remote_session=bool(master), replicas=built.replicas, model_scaffold=built.spec.scaffold is not None,
        model_hooks=bool(list(other_hooks)), plain_input=plain,
        input_state=plain and state_updates.reads_state(built.input_hooks[0].iterator.initializer),
        seeded=seed is not None, draws_random_numbers=reached.draws_random_numbers)


def plain_input(built) -> bool:
    """Whether a built graph's input is one dataset's iterator, started by its hook alone (`calls.plain_dataset`)."""
    return calls.plain_dataset(built.input_hooks)


def _same(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if isinstance(x, RunConfig):
            return False  # the same config object, not an equal one: a config may hold a strategy or a function
        try:
            if not bool(x == y):
                return False
        except Exception:  # noqa: BLE001 - values that do not compare (arrays): not the same
            return False
    return True


_RANDOM = ("TruncatedNormal", "Multinomial", "ParameterizedTruncatedNormal")


def is_stateful_random(op_type: str) -> bool:
    op_def = tf_internals.op_def_registry.get(op_type)
    if op_def is None or not op_def.is_stateful:
        return False
    return "Random" in op_type or op_type.startswith("Stateful") or op_type in _RANDOM


_WRITES = ("Assign", "ResourceApply", "ResourceSparseApply", "ResourceScatter", "ResourceStridedSliceAssign",
           "ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMin", "ScatterMax")


@dataclasses.dataclass(frozen=True)
class _Reach:
    draws_random_numbers: bool
    """A stateful random op runs (in the graph or in a function it calls)."""
    writes_model: bool
    """An op may change a global variable: a write to one, or a function call given one."""


def reach(fetches) -> _Reach:
    """What running `fetches` in the current graph may do, from every op it runs and every function those call."""
    graph = tf.compat.v1.get_default_graph()
    model = {v.op for v in tf.compat.v1.global_variables()}
    random = writes = False
    seen: set = set()
    stack = [t if isinstance(t, tf.Operation) else t.op for t in tf.nest.flatten(fetches)]
    functions: list[str] = []
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        random = random or is_stateful_random(op.type)
        called = _called(op.node_def)
        functions.extend(called)
        if any(t.op in model for t in op.inputs) and (called or op.type.startswith(_WRITES)):
            writes = True
        stack.extend([*op.control_inputs, *(t.op for t in op.inputs)])
    library = {f.signature.name: f for f in graph.as_graph_def().library.function} if functions else {}
    done: set = set()
    while functions and not random:
        name = functions.pop()
        if name in done or name not in library:
            continue
        done.add(name)
        for node in library[name].node_def:
            random = random or is_stateful_random(node.op)
            functions.extend(_called(node))
    return _Reach(draws_random_numbers=random, writes_model=writes)


def _called(node_def) -> list[str]:
    """The functions a node calls (its function-valued attributes: an If's branches, a call's function)."""
    names = []
    for value in node_def.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        names.extend(f.name for f in value.list.func)
    return names
