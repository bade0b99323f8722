"""The parameter-server cluster's plumbing: servers, reachability, and the end-of-job signal.

A parameter server has no training loop of its own, so it needs to be told
when the job is over. Each ps task holds a small queue; the chief and every
worker put a token in each ps queue when they finish training. A ps exits once
it has the chief's token and either every worker's token or a grace period
has passed (a worker that died will never send one).

A worker that was cut off (network, a freeze) while the job ended would wait for
those parameter servers forever; `StrandedWorkerExit` ends it instead.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Callable

import tensorflow as tf

from elastimator._network import reachable_within
from elastimator.errors import ClusterError
from elastimator.estimator import RunConfig, TaskType, is_collective, with_logical_devices

logger = logging.getLogger("elastimator")
CHIEF_TOKEN, WORKER_TOKEN = 0, 1
WORKER_GRACE_SECS = 60.0


def server_config(config: RunConfig) -> tf.compat.v1.ConfigProto:
    """Enough inter-op threads for every trainer's concurrent requests on a small machine; for a strategy whose
    workers all-reduce, what its collectives need of the server (their group leader)."""
    proto = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=max(2, config.num_worker_replicas + 2), allow_soft_placement=True)
    if is_collective(config.train_distribute):
        proto = config.train_distribute.extended._update_config_proto(proto)  # pylint: disable=protected-access
    return with_logical_devices(proto)


def strategy_started_server(config: RunConfig) -> bool:
    """Whether this task's strategy started its server as it was made: MultiWorkerMirroredStrategy does when
    made with eager execution on (TF2's default); made after `tf.compat.v1.disable_eager_execution()`, as
    TensorFlow's own Estimator tutorial does, it leaves that to the Estimator (tf.estimator 2.15's distribute
    coordinator started one)."""
    return bool(getattr(config.train_distribute.extended, "_std_server_started", False))


def start_server(config: RunConfig) -> tf.distribute.Server:
    """Starts this task's gRPC server; a port that cannot be bound is a clear error."""
    address = config.cluster_spec.task_address(config.task_type, config.task_id)
    try:
        return tf.distribute.Server(
            config.cluster_spec, job_name=config.task_type, task_index=config.task_id,
            protocol=config.protocol or "grpc", config=server_config(config), start=True,
        )
    except (tf.errors.UnknownError, tf.errors.InternalError, tf.errors.UnavailableError) as e:
        raise ClusterError(
            f"{config.task_type} task {config.task_id} could not start its server on {address}: "
            f"{str(e).splitlines()[0]}. Is the port already in use? Give this task a free port in "
            "TF_CONFIG's cluster, or stop the process that holds it."
        ) from e


def _done_queue(ps_index: int):
    with tf.compat.v1.device(f"/job:ps/task:{ps_index}"):
        return tf.queue.FIFOQueue(
            1024, tf.int32, shapes=[[]], shared_name=f"elastimator_done_ps{ps_index}", name=f"done_ps{ps_index}")


def reachable_ps(config: RunConfig, within_secs: float) -> list[int]:
    """The parameter servers that accept connections, looking for up to `within_secs` until all do."""
    return reachable_within(config.cluster_spec.as_dict().get(TaskType.PS, []), within_secs, poll_secs=0.5)


def signal_done(config: RunConfig, target: str) -> None:
    """Tells every parameter server that this trainer has finished (best effort). A parameter server that no
    longer answers (it shut down when training ended, before this trainer came back) is not waited for: a session
    naming it would wait for it forever."""
    token = CHIEF_TOKEN if config.is_chief else WORKER_TOKEN
    up = reachable_ps(config, within_secs=5.0)
    if len(up) < config.num_ps_replicas:
        logger.info("%s %d: parameter server(s) %s no longer answer (training had ended); not telling them.",
                    config.task_type, config.task_id, sorted(set(range(config.num_ps_replicas)) - set(up)))
    if not up:
        return
    with tf.Graph().as_default():
        enqueues = [_done_queue(i).enqueue(token) for i in up]
        # Only the ps tasks and this task: a session must not wait for another trainer that may be gone.
        session_config = tf.compat.v1.ConfigProto(
            device_filters=[*(f"/job:ps/task:{i}" for i in up), f"/job:{config.task_type}/task:{config.task_id}"],
            operation_timeout_in_ms=30_000)
        try:
            with tf.compat.v1.Session(target, config=session_config) as session:
                session.run(enqueues, options=tf.compat.v1.RunOptions(timeout_in_ms=10_000))
        except tf.errors.OpError as e:
            logger.warning("Could not tell the parameter servers that training ended: %s", str(e).splitlines()[0])


def serve_until_done(server: tf.distribute.Server, config: RunConfig,
                     worker_grace_secs: float = WORKER_GRACE_SECS) -> None:
    """Runs a parameter server until the chief (and, within a grace period, the workers) finish."""
    if config.task_type != TaskType.PS:
        raise ClusterError(f"serve_until_done is for ps tasks; this task is {config.task_type!r}.")
    workers = config.num_worker_replicas - 1
    with tf.Graph().as_default():
        dequeue = _done_queue(config.task_id).dequeue()
        session_config = tf.compat.v1.ConfigProto(device_filters=[f"/job:ps/task:{config.task_id}"])
        with tf.compat.v1.Session(server.target, config=session_config) as session:
            chief_done, workers_done = False, 0
            while not chief_done:
                token = session.run(dequeue)
                chief_done = token == CHIEF_TOKEN
                workers_done += token == WORKER_TOKEN
            logger.info("ps %d: the chief finished; waiting up to %.0fs for %d worker(s).", config.task_id,
                        worker_grace_secs, workers - workers_done)
            deadline = time.monotonic() + worker_grace_secs
            while workers_done < workers:
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0:
                    logger.warning("ps %d: %d worker(s) did not report the end of training; exiting anyway.",
                                   config.task_id, workers - workers_done)
                    break
                try:
                    token = session.run(dequeue, options=tf.compat.v1.RunOptions(timeout_in_ms=left_ms))
                except tf.errors.DeadlineExceededError:
                    continue
                workers_done += token == WORKER_TOKEN
    logger.info("ps %d: training is over; shutting down.", config.task_id)


class StrandedWorkerExit(tf.compat.v1.train.SessionRunHook):
    """Ends a worker that the job finished without: it exits 0 once the chief has marked training done (after
    this worker started) and no step of this worker has finished for `idle_secs`.

    Such a worker was cut off or frozen while the job ended, and is now stuck re-creating its session against
    parameter servers that are gone (TensorFlow waits for them without end). Its part of the job is done: the
    shard service gave its shards to others, and a worker keeps no state.

    Args:
        chief_done_at: The wall time the chief marked training done, or None while it has not.
    """

    several_steps_per_call = True  # acts on time since a call ended (elastimator.estimator.step.steps_per_call)

    def __init__(self, chief_done_at: Callable[[], float | None], idle_secs: float = 60.0, poll_secs: float = 2.0,
                 exit_process: Callable[[int], None] = os._exit, clock: Callable[[], float] = time.monotonic):
        self._chief_done_at, self._idle, self._poll = chief_done_at, idle_secs, poll_secs
        self._exit, self._clock = exit_process, clock
        self._started = time.time()
        self._last_step = clock()
        self._stop = threading.Event()

    def begin(self):
        threading.Thread(target=self._watch, name="stranded-worker-exit", daemon=True).start()

    def after_run(self, run_context, run_values):
        self._last_step = self._clock()

    def end(self, session):
        self._stop.set()

    def stranded(self) -> bool:
        """Whether the job ended (after this worker started) and this worker has trained nothing for a while."""
        done_at = self._chief_done_at()
        return done_at is not None and done_at >= self._started and self._clock() - self._last_step >= self._idle

    def _watch(self) -> None:
        while not self._stop.wait(self._poll):
            if self.stranded():
                logger.warning("The chief finished training while this worker was cut off from the job, and it "
                               "has trained nothing for %.0fs since; nothing is left for it to do: exiting.",
                               self._idle)
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                self._exit(0)
                return
