"""Scaffolds and session creators shared by the verbs."""

from __future__ import annotations

import logging
import time

import tensorflow as tf

from elastimator._network import reachable_within
from elastimator.errors import ClusterError
from elastimator.estimator.saving import checkpoints

logger = logging.getLogger("elastimator")


def make_scaffold(spec, config, *, ready_once_made: bool = False) -> tf.compat.v1.train.Scaffold:
    """The user's scaffold, with elastimator's saver filled in when it has none.

    With `ready_once_made` (a session that initializes or restores the model itself, not one that waits for
    another process to), TensorFlow's readiness checks are left out where they cannot fail: the model's scaffold
    initializes nothing itself (no init or local init op, init_fn or readiness check of its own), the graph
    registers no shared resource (which a restore does not set), and the saver is elastimator's (a model's own,
    its scaffold's or the one in the graph's SAVERS collection, is used instead, with the checks). That saver is
    built when the scaffold is finalized, after every hook's `begin`, over every global variable and saveable,
    so a restore sets them all or raises; without a checkpoint the default init op initializes them all, and the
    default local init op every local variable. The checks (which variables are still uninitialized, built op
    by op for each) are paid before the first step (docs/performance.md, "Costs behind the engine's choices").
    """
    user = spec.scaffold
    if user is not None and user.saver is not None:
        return user
    collected = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS)
    if len(collected) == 1:
        # The model's saver, kept in the graph's SAVERS collection (as mesh-tensorflow's MNIST shares it with its
        # own CheckpointSaverHook): TensorFlow's Scaffold restored and saved with it in tf.estimator. It may name
        # the variables otherwise or leave some out, so the readiness checks stay.
        return tf.compat.v1.train.Scaffold(saver=collected[0], copy_from_scaffold=user)
    ready = _no_readiness_check() if ready_once_made and _checks_cannot_fail(user) else None
    return tf.compat.v1.train.Scaffold(saver=checkpoints.make_saver(config), ready_op=ready,
                                       ready_for_local_init_op=ready, copy_from_scaffold=user)


def _no_readiness_check() -> tf.Tensor:
    """A readiness check that always passes (an empty list of uninitialized names), for a scaffold whose session
    cannot come out of its init or restore unready (`make_scaffold`)."""
    return tf.constant([], tf.string, name="ready_once_made")


def _checks_cannot_fail(scaffold) -> bool:
    """Whether, with elastimator's saver, the readiness checks cannot fail (`make_scaffold`): the model's scaffold
    (None: it has none) initializes or checks nothing itself, and the graph registers no shared resource."""
    if tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.RESOURCES):
        return False
    if scaffold is None:
        return True
    return all(part is None for part in (scaffold.init_op, scaffold.init_fn, scaffold.ready_op,
                                         scaffold.ready_for_local_init_op, scaffold.local_init_op))


class WorkerSessionCreator(tf.compat.v1.train.SessionCreator):
    """A non-chief session that waits for the chief to initialize the model, checking twice a second.

    TensorFlow's own WorkerSessionCreator re-checks only every 30 seconds, so a
    worker that starts a moment before the chief idles for half a minute.
    """

    def __init__(self, scaffold, master: str, config, max_wait_secs: float, poll_secs: float = 0.5):
        self._scaffold, self._master, self._config = scaffold, master, config
        self._max_wait_secs, self._poll_secs = max_wait_secs, poll_secs

    def create_session(self):
        self._scaffold.finalize()
        manager = tf.compat.v1.train.SessionManager(
            local_init_op=self._scaffold.local_init_op,
            local_init_feed_dict=self._scaffold.local_init_feed_dict,
            ready_op=self._scaffold.ready_op,
            ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
            graph=tf.compat.v1.get_default_graph(),
            recovery_wait_secs=self._poll_secs,
        )
        return manager.wait_for_session(self._master, config=self._config, max_wait_secs=self._max_wait_secs)


def training_session_creator(scaffold, config, model_dir: str, session_config=None,
                             every_task_initializes: bool = False):
    """Chief (or single) processes initialize or restore from model_dir; workers wait for the chief, unless
    `every_task_initializes` (each process holds its own copies of the variables: a strategy over several
    processes)."""
    session_config = session_config or config.effective_session_config()
    if config.is_chief or every_task_initializes:
        return NewestIntactSessionCreator(scaffold, config.master, session_config, model_dir)
    return WorkerSessionCreator(scaffold, config.master, session_config, config.session_creation_timeout_secs)


class NewestIntactSessionCreator(tf.compat.v1.train.SessionCreator):
    """The chief's sessions: each (a recovered one too) restores the newest checkpoint that reads whole, not
    TensorFlow's newest by name, so a damaged newest checkpoint is skipped instead of failing every restart."""

    def __init__(self, scaffold, master: str, config, model_dir: str):
        self._scaffold, self._master, self._config, self._model_dir = scaffold, master, config, model_dir

    def create_session(self):
        checkpoint = checkpoints.CheckpointDir(self._model_dir).newest()
        session = tf.compat.v1.train.ChiefSessionCreator(
            scaffold=self._scaffold, master=self._master, config=self._config,
            checkpoint_filename_with_path=checkpoint,
        ).create_session()
        if checkpoint is not None:  # (before the hooks' after_create_session, where a saver hook saves)
            checkpoints.recall_saved(self._scaffold.saver, self._model_dir)
        return session


def evaluation_scaffold(spec, config) -> tf.compat.v1.train.Scaffold:
    """`make_scaffold` for evaluation: a model's own `local_init_op` runs together with the default one.

    The metrics (and the loss metric elastimator adds) make their local variables after the model_fn built its
    scaffold, so a `local_init_op` of the model's alone would leave them uninitialized; tf.estimator grouped
    the two, and frameworks (AdaNet) rely on it.
    """
    scaffold = make_scaffold(spec, config, ready_once_made=True)
    user = spec.scaffold
    if user is None or user.local_init_op is None:
        return scaffold
    combined = tf.group(user.local_init_op, tf.compat.v1.train.Scaffold.default_local_init_op())
    return tf.compat.v1.train.Scaffold(local_init_op=combined, copy_from_scaffold=scaffold)


def restoring_session_creator(spec, config, checkpoint: str | None, master: str, scaffold=None):
    """A session that restores `checkpoint` (or initializes, when None) for evaluation or prediction, with
    `scaffold` (default: `make_scaffold`'s)."""
    return tf.compat.v1.train.ChiefSessionCreator(
        scaffold=scaffold or make_scaffold(spec, config), master=master,
        config=config.effective_session_config(), checkpoint_filename_with_path=checkpoint,
    )


def wait_for_tasks(config, job: str, timeout_secs: float, log_every_secs: float = 10.0) -> None:
    """Waits (bounded, logged) until every task of `job` accepts connections.

    Raises:
        ClusterError: after `timeout_secs`, naming the tasks still unreachable.
    """
    addresses = config.cluster_spec.as_dict().get(job, [])
    named = lambda indices: ", ".join(f"/job:{job}/task:{i} ({addresses[i]})" for i in indices)  # noqa: E731
    next_log = time.monotonic() + log_every_secs

    def log_now_and_then(missing: list[int], left: float) -> None:
        nonlocal next_log
        if time.monotonic() >= next_log:
            logger.info("Waiting for %s to accept connections (%.0fs left).", named(missing), left)
            next_log = time.monotonic() + log_every_secs

    up = reachable_within(addresses, timeout_secs, waiting=log_now_and_then)
    missing = [i for i in range(len(addresses)) if i not in up]
    if missing:
        raise ClusterError(
            f"{config.task_type} task {config.task_id} gave up after {timeout_secs:.0f}s waiting for "
            f"{named(missing)}. Start those tasks, or check the addresses in TF_CONFIG."
        )

