"""Evaluation and prediction graphs kept between calls.

tf.estimator built a fresh graph and session for every `evaluate` and `predict`
call: input_fn, model_fn, the scaffold's savers and checks, a session, a restore.
For a DeepFM that is most of a 50-batch call (bench/results/frameworks.md), paid
again by every evaluation of `train_and_evaluate` and every scoring call.

Here the first call of a mode keeps its graph and session (`kept_graph.KeptGraph`,
whose life stages and background work are its own). A later
call of that mode, where nothing the model is built from changed, reuses them:

- `input_fn` is called again, every call, as before (a glob of new files, a
  Python-side choice of data, all as in tf.estimator); its dataset starts the
  kept iterator when it yields exactly what the first one did (`element_spec`).
- `model_fn` is not called again: the model was built from the same features,
  labels, mode, params (equal) and config (the same object).
- The checkpoint is restored into the kept session at every call (the newest,
  or the one asked for), and the local variables (metrics) are reset.
- What each call runs (a batch, an evaluation's results) goes through a
  callable made once with the session (`kept_graph.Served.runs`), whose executors
  TensorFlow builds as it is made (`callables.made_now`): the first call makes
  them in the background while the checkpoint is restored, not inside its
  first batch.

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
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.run_config import RunConfig
from elastimator.estimator.graph import calls, effects, model_graph, state_updates
from elastimator.estimator.loops import background, call_plan, callables
from elastimator.estimator.loops.kept_graph import KeptGraph, Served, Stage
from elastimator.estimator.saving import checkpoints

logger = logging.getLogger("elastimator")


class WarmGraphs:
    """An Estimator's kept graphs, one per mode: each IDLE or RESTING while here, IN_USE while a call has it."""

    def __init__(self):
        self._kept: dict[str, KeptGraph] = {}
        self._lock = threading.RLock()

    def __reduce__(self):  # a copied (or pickled) Estimator starts with no kept graphs: sessions do not copy
        return (WarmGraphs, ())

    def take(self, mode: str, key: tuple) -> KeptGraph | None:
        """The kept graph of `mode` if it was built under `key`, is free, and may serve another call
        (`call_plan.reuse`), IN_USE from now; the caller gives it back."""
        with self._lock:
            warm = self._kept.get(mode)
            same = warm is not None and _same(warm.key, key)
            if same:
                del self._kept[mode]
        decision = call_plan.reuse(None if warm is None else warm.facts(same))
        if not decision:
            logger.debug("%s builds its graph afresh: %s", mode, decision.reason)
            if same:
                warm.close()
            return None
        warm.taken()
        return warm

    def give_back(self, warm: KeptGraph, *, free_now: bool = False) -> None:
        """Keeps `warm` for the next call of its mode (closing the one it replaces), its input freed in the
        background, which the next call waits for (or now, with `free_now`).

        Freeing an exhausted iterator (TensorFlow's, as its session runs the next initializer) can take long,
        the more so when left to the next call's start after a `train` (docs/performance.md, "Costs behind the
        engine's choices"). The session runs it without the GIL, beside the program.
        """
        warm.idle(free_now=free_now)
        with self._lock:
            replaced = self._kept.get(warm.mode)
            self._kept[warm.mode] = warm
        if replaced is not None and replaced is not warm:
            replaced.close()

    @contextlib.contextmanager
    def in_use(self, warm: KeptGraph) -> Iterator[KeptGraph]:
        """A call's use of `warm`: given back when the call ends or its caller stops reading early (a generator
        closed), closed when the call fails.

        A generator left unfinished in a reference cycle is closed by the garbage collector, which may run inside
        a lock of `threading`'s (a `Thread.join()` that allocates): background work submitted there could wait
        for that lock forever, so an early stop frees its input in the closing thread. For the same reason
        `_lock` is reentrant, and `take` checks that the graph's session is still open.
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
        """Closes the session of `mode`'s kept graph (`KeptGraph.rest`), keeping the graph for the next call
        (which opens a session anew and restores the newest checkpoint into it).

        Used for training's: another verb is about to open a session of its own, beside which a kept training
        session would hold the model and its optimizer's slots in memory (tf.estimator closed it as each train
        call ended) (docs/performance.md, "Costs behind the engine's choices"). The session closes in the
        background, as the verb builds its graph.
        """
        with self._lock:
            warm = self._kept.pop(mode, None)
        if warm is None:
            return
        if warm.stage is Stage.IDLE:
            warm.rest()
        with self._lock:
            kept = self._kept.setdefault(warm.mode, warm)
        if kept is not warm:  # a call gave back another meanwhile
            warm.close()

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
             on_start: Callable[[], None] | None = None) -> KeptGraph | None:
        """The kept graph of this call's mode, readied for it (`_start`), or None where the call builds afresh.
        `on_start` is called once its input is known to fit, before the checkpoint is restored."""
        warm = self.graphs.take(self.mode, self.key)
        if warm is not None and _start(warm, self.estimator, input_fn, checkpoint, on_start):
            return warm
        return None

    def keep(self, built, scaffold, checkpoint: str, master: str, fetches: Mapping[str, Any],
             other_hooks: Iterable) -> KeptGraph | None:
        """Keeps the graph a call just built (no session made on it yet), if the next call can reuse it: the graph
        completed and finalized, its session made, the checkpoint restored, the input started, and a callable made
        of each of `fetches` (name -> what every call runs). None where it cannot; the call then runs it as 2.15
        did.

        `scaffold` is `sessions.make_scaffold(..., ready_once_made=True)`'s: a kept graph has no scaffold of the
        model's, so its readiness checks are left out wherever they cannot fail.
        """
        reached = effects.reach(fetches)
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
        return KeptGraph(mode=self.mode, key=self.key, graph=graph, session=session, iterator=iterator,
                         saver=scaffold.saver, reset=reset, release=release,
                         payload=Served(fetches=dict(fetches), runs=runs, writes_model=reached.writes_model),
                         restored=checkpoints.CheckpointDir.stamp(checkpoint))


def _open(session: tf.compat.v1.Session, scaffold, checkpoint: str, start_input: tf.Operation,
          fetches: Mapping[str, Any]) -> dict[str, Callable]:
    """Readies a kept graph's new session, on its finalized graph, as TensorFlow's ChiefSessionCreator would for a
    scaffold of elastimator's alone (`keep`): the checkpoint restored, then the local variables initialized and
    the input started. Returns the callables of `fetches`, made in the background meanwhile
    (`callables.made_now`)."""
    made = background.submit(lambda: {name: callables.made_now(session, what) for name, what in fetches.items()})
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


def batches(warm: KeptGraph, name: str) -> Iterator:
    """Runs the callable `name` of a readied kept graph until its input ends, yielding each result."""
    run = warm.payload.runs[name]
    while True:
        try:
            result = run()
        except tf.errors.OutOfRangeError:
            return
        yield result


def input_begin(warm: KeptGraph, estimator, input_fn: Callable) -> tf.Operation | None:
    """Calls `input_fn` in `warm`'s graph (opened by `KeptGraph.with_input`) as a fresh graph of its mode would
    call it: what starts the kept iterator on its dataset, or None where `call_plan.reuse_input` says the kept
    graph cannot run it. The graph then frees that dataset with its own release."""
    config = estimator.config
    with warm.graph.as_default(), model_graph.seeded(config.tf_random_seed):
        before = effects.state_of(warm.graph)
        result = calls.input_fn_result(input_fn, warm.mode, estimator._params_for(warm.mode), config)  # pylint: disable=protected-access
        dataset = isinstance(result, tf.data.Dataset)
        same = dataset and result.element_spec == warm.iterator.element_spec
        begin = calls.start_on(warm.iterator, result) if same else None
        runs = state_updates.ancestors([begin]) if begin is not None else set()
        decision = call_plan.reuse_input(warm.mode, call_plan.InputFacts(
            dataset=dataset, same_spec=same, reads_state=state_updates.makes_state(runs),
            makes_state=effects.state_of(warm.graph) != before,
            random=config.tf_random_seed is not None and effects.random_input(runs)))
        if not decision:
            logger.debug("%s builds its graph afresh: %s", warm.mode, decision.reason)
            return None
        warm.releases_with(calls.start_on(warm.iterator, result.take(0)))
        return begin


def _start(warm: KeptGraph, estimator, input_fn: Callable, checkpoint: str,
           on_start: Callable[[], None] | None = None) -> bool:
    """Readies `warm` for a call: calls `input_fn` in its graph, restores `checkpoint` (unless the session holds
    it unchanged and the calls change no model variable), resets the metrics and starts the input. False (the
    graph then closed) when the kept graph cannot run the input."""
    try:
        begin = warm.with_input(lambda: input_begin(warm, estimator, input_fn))
        if begin is None:
            warm.close()
            return False
        if on_start is not None:
            on_start()
        warm.restore(checkpoint, changed_since=warm.payload.writes_model)
        warm.begin(begin)
    except BaseException:
        warm.close()
        raise
    return True


def _graph_facts(built, other_hooks: Iterable, master: str, reached: effects.Reach, seed) -> call_plan.GraphFacts:
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
