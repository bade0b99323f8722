"""Training graphs kept between `train` calls.

A program that alternates `train` and `evaluate` (a tutorial's epochs, a
hand-written train-and-evaluate, a scoring job that fine-tunes first) built, in
tf.estimator, a new graph and session at every `train` call: input_fn,
model_fn (the optimizer's slots and gradients among it), the scaffold's saver,
a session, and a restore of the checkpoint the call before had just written
(docs/performance.md).

Here, as evaluation and prediction do (`warm_graphs`), a `train` call keeps its
graph and session for the next call where nothing the model is built from
changed (the model_fn, params, the RunConfig object):

- `input_fn` is called again, every call, in the kept graph; its dataset starts
  the kept iterator when it yields exactly what the first one did.
- `model_fn` is not called again.
- The session restores the newest checkpoint unless it holds it already: the
  last call ended by saving its variables as that checkpoint, and nothing wrote
  another since (a stamp of the files, `CheckpointDir.stamp`). A checkpoint of
  another program, a rollback, or a call that saved nothing at its end is
  restored, as a new session would.
- The local variables are initialized again, as in a new session.
- Every hook is made and begun anew in the kept graph: the caller's, the
  checkpoint saver (which writes its checkpoint at session creation, as before),
  summaries, step counter, stop-at-step. Calls run one step or several as the
  first call's graph was built; a graph built for one step per call is built
  afresh when the call could run several (see `steps_per_call`).

Kept only where later calls behave as fresh ones: a local, single-process,
single-replica chief; the model's spec has no hooks and no scaffold of its own;
the input is a plain dataset; no embedding variable evicts at saves; the
variables hold at most `call_plan.MAX_KEPT_BYTES`; the hooks' `begin` adds no variable or
table (train_loop calls it before the session is made, and a kept graph whose hooks added
state is closed and the call built afresh); when `tf_random_seed` is set, neither the step nor the input draws random
numbers (a fresh graph drew the same ones every call). A call that fails or is
stopped by a signal closes its graph. `RunConfig(reuse_graphs=False)` turns it
off, with evaluation's and prediction's.
"""

from __future__ import annotations

import logging
import os
from typing import Callable

import tensorflow as tf

from elastimator.embedding import eviction as embedding_eviction
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import calls, effects, state_updates
from elastimator.estimator.loops import call_plan, warm_graphs
from elastimator.estimator.loops.kept_graph import KeptGraph, TrainingParts
from elastimator.estimator.saving import checkpoints

logger = logging.getLogger("elastimator")


def reuse_for(estimator) -> warm_graphs.Reuse | None:
    """What this `train` call may reuse or keep, or None where its config rules keeping out."""
    config = estimator.config
    local_chief = not (config.cluster.is_distributed or config.master or not config.is_chief
                       or config.train_distribute is not None)
    return warm_graphs.reuse_of(estimator, warm_graphs.call_facts(estimator, ModeKeys.TRAIN, local_chief=local_chief))


def keepable(parts: TrainingParts, model_hooks: list, seed: int | None, hooks_added_state: bool) -> bool:
    """Whether a freshly built training graph's later calls would behave as fresh ones (`call_plan.keep`), its
    hooks begun."""
    decision = call_plan.keep(ModeKeys.TRAIN, _graph_facts(parts, model_hooks, seed, hooks_added_state))
    if not decision:
        logger.debug("train keeps nothing: %s", decision.reason)
    return decision.yes


def _graph_facts(parts: TrainingParts, model_hooks: list, seed: int | None,
                 hooks_added_state: bool) -> call_plan.GraphFacts:
    """A training graph, as `call_plan.keep` weighs it. What the step and input draw is read only when seeded."""
    built = parts.built
    plain = warm_graphs.plain_input(built)
    input_ops = state_updates.ancestors([built.input_hooks[0].iterator.initializer]) if plain else set()
    seeded = seed is not None
    return call_plan.GraphFacts(
        replicas=built.replicas, model_scaffold=built.spec.scaffold is not None, model_hooks=bool(model_hooks),
        plain_input=plain, input_state=state_updates.makes_state(input_ops), seeded=seeded,
        draws_random_numbers=seeded and effects.reach([parts.step.train_op, parts.step.loss]).draws_random_numbers,
        random_input=seeded and effects.random_input(input_ops), step_outputs=bool(built.step_outputs),
        evicting_embeddings=bool(embedding_eviction.eviction_listeners(tf.compat.v1.get_default_graph())),
        variable_bytes=_variable_bytes(), hooks_added_state=hooks_added_state)


def _variable_bytes() -> float:
    """What the current graph's variables hold, in bytes (infinite where a shape is not static)."""
    total = 0.0
    for variable in tf.compat.v1.global_variables() + tf.compat.v1.local_variables():
        elements = variable.shape.num_elements()
        if elements is None:
            return float("inf")
        total += elements * variable.dtype.base_dtype.size
    return total


def start(reuse: warm_graphs.Reuse, input_fn: Callable,
          fits: Callable[[TrainingParts, bool], call_plan.Decision]) -> tuple[KeptGraph, object] | None:
    """The kept training graph readied for this call (its graph left open for the call's hooks, its input built),
    with the hook that starts its input, or None where the call builds afresh: none is kept, `fits(parts,
    whether its session is kept)` declines it (`call_plan.steps_fit`), or the kept graph cannot run the input
    (`call_plan.reuse_input`)."""
    warm = reuse.graphs.take(reuse.mode, reuse.key)
    if warm is None:
        return None
    decision = fits(warm.payload, warm.session is not None)
    if not decision:
        logger.debug("train builds its graph afresh: %s", decision.reason)
        warm.close()
        return None
    try:
        begin = warm.with_input(lambda: warm_graphs.input_begin(warm, reuse.estimator, input_fn), keep_open=True)
        if begin is not None:
            warm.ensure_reset()
            return warm, calls.DatasetInitializerHook(warm.iterator, initializer=begin)
    except BaseException:
        warm.close()
        raise
    warm.close()
    return None


class Keeper:
    """A `train` call's side of keeping its graph: gives the monitored session a session it leaves open, and
    keeps graph and session for the next call once the call ended well, or closes them (`keep`).

    Args:
        reuse: Where the graph is kept, and under what key.
        parts: What the call's graph runs.
        checkpoint: The checkpoint the call resumes from (`CheckpointDir.resume_point`).
        warm: The kept graph this call runs in (IN_USE), or None for the graph built now (the default one, its
            hooks begun, not yet finalized).
    """

    def __init__(self, reuse: warm_graphs.Reuse, parts: TrainingParts, checkpoint: str | None,
                 warm: KeptGraph | None = None):
        self._reuse, self._parts, self._checkpoint, self._warm = reuse, parts, checkpoint, warm
        if warm is None:
            source = parts.built.input_hooks[0]
            self._iterator, self._release = source.iterator, calls.start_on(source.iterator, source.dataset.take(0))
        self._graph = tf.compat.v1.get_default_graph()
        self._session: tf.compat.v1.Session | None = None if warm is None else warm.session
        self._kept_session_used = False

    def creator(self, inner: tf.compat.v1.train.SessionCreator) -> tf.compat.v1.train.SessionCreator:
        """The monitored session's creator: the kept session first (restored where it must be), then (a session
        re-created after an error) `inner`'s."""
        return _Creator(self, inner)

    def _create(self, inner) -> tf.compat.v1.Session:
        if self._warm is not None and not self._kept_session_used:
            self._kept_session_used = True
            self._parts.scaffold.finalize()
            # The saver knows the checkpoints the state file lists, as a new one restoring in tf.estimator did.
            checkpoints.recall_saved(self._parts.scaffold.saver, self._reuse.estimator.model_dir)
            if self._session is not None:
                self._warm.restore(self._checkpoint, changed_since=False)
                self._warm.begin(None)  # the local variables initialized, as in a new session
                return self._session
        session = inner.create_session()
        if self._session is not None and self._session is not session:
            self._session.close()
        self._session = session
        return session

    def keep(self, ended_well: bool) -> None:
        """Keeps the graph and session for the next call (freeing its input meanwhile) when the call `ended_well`
        (not failed, nor stopped by a signal); else closes the session."""
        if self._session is None or not ended_well:
            self._discard()
            return
        warm = self._warm
        if warm is None:
            warm = KeptGraph(mode=self._reuse.mode, key=self._reuse.key, graph=self._graph, session=self._session,
                             iterator=self._iterator, saver=self._parts.scaffold.saver, release=self._release,
                             payload=self._parts, restored=None)
        warm.holds(self._session, _held(self._session, self._parts, self._reuse.estimator.model_dir))
        self._reuse.graphs.give_back(warm)

    def _discard(self) -> None:
        if self._warm is not None:
            self._warm.close()
        if self._session is not None:
            self._session.close()
            self._session = None


class _Creator(tf.compat.v1.train.SessionCreator):
    leaves_sessions_open = True
    """The monitored session does not close what this makes (`hooked_session`): the keeper keeps or closes it."""

    def __init__(self, keeper: Keeper, inner):
        self._keeper, self._inner = keeper, inner

    def create_session(self):
        return self._keeper._create(self._inner)  # pylint: disable=protected-access


def _held(session: tf.compat.v1.Session, parts: TrainingParts, model_dir: str) -> tuple | None:
    """The stamp of the newest checkpoint when it holds exactly the session's variables (the call's saver wrote it
    at the step the session is at), else None (the next call restores it)."""
    saved = parts.scaffold.saver.last_checkpoints
    newest = checkpoints.CheckpointDir(model_dir).newest()
    if not saved or newest is None or os.path.normpath(saved[-1]) != os.path.normpath(newest):
        return None
    step = int(session.run(parts.built.global_step))
    try:
        if checkpoints.step_of_path(newest) != step:
            return None
    except Exception:  # noqa: BLE001 - a prefix named otherwise: restore it
        return None
    return checkpoints.CheckpointDir.stamp(newest)
