"""The training side of elastic sharding: shards in, progress out, seals with checkpoints.

* `ShardFeed` asks the shard service for index ranges, reads them from an
  `ElasticReader` in batches, and tags each batch with (shard id, records).
* `ShardReportHook` sends a batch's report as the call that trained it ends,
  and the next call's writes wait until it is in, so a process that dies has at
  most one trained batch unreported: the one batch replayed for it. How the
  report travels and what the writes wait for is the report channel of this
  process's transport (elastic/report_channel.py: the report ring on the
  service's machine, else answered over the report line or gRPC).
* `ShardFeed.is_current` tells whether the service has since taken a batch's
  lease back (a rewind); such batches are dropped: as they are read, and again
  right before the step writes (or, in calls of several steps, as the step's
  loop takes them).
* `ShardSealListener` (chief) seals the book right before each checkpoint save
  and commits it right after; `ShardRestoreHook` (chief) rewinds the book to the
  checkpoint a session restores, and waits for the workers to hear of it.

Where the service is and the job's token: elastic/service_config.py.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterator

import numpy as np
import tensorflow as tf

from elastimator.data import reader as readers
from elastimator.data.parsing import BAD_RECORDS_HINT
from elastimator.elastic import report_ring
from elastimator.elastic.client import ShardClient
from elastimator.elastic.report_channel import open_channel
from elastimator.elastic.report_queue import ReportQueue
from elastimator.elastic.shards import (
    SHARD_TAG,
    Assigned,
    ShardingSpec,
    Drained,
    Failed,
    Finished,
    LeaseTakenBackError,
    ShardBook,
    ShardServiceError,
    Wait,
)
from elastimator.errors import ReaderError
from elastimator.estimator import CheckpointDir, StepHook, TrainingStep

logger = logging.getLogger("elastimator")
class ShardFeed:
    """One process's stream of shards from the service, and its reports back.

    Args:
        client: A client whose worker name identifies this process.
        dataset: The data set as the service should shard it.
        wait_timeout_secs: How long to wait while all shards are out (then ReaderError).
        heartbeat_secs: How often to tell the service this process is alive.
        synchronous: The workers train in lockstep (MultiWorkerMirroredStrategy): when every remaining shard is
            another worker's, this process's input ends instead of waiting, since those workers cannot finish
            theirs without it stepping along (it trains its last batch again meanwhile, graph/uneven_ends.py).
    """

    def __init__(self, client: ShardClient, dataset: ShardingSpec, wait_timeout_secs: float = 600.0,
                 heartbeat_secs: float = 1.0, synchronous: bool = False):
        self.client = client
        self.synchronous = synchronous
        self.dataset = dataset
        self._wait_timeout = wait_timeout_secs
        self._heartbeat_secs = heartbeat_secs
        self._abandoned: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self._reported = False
        self._reporter: ReportQueue | None = None
        self._generation = 0
        """Counts the input's iterators: one that a newer one replaced must not keep shards."""

    def start(self) -> "ShardFeed":
        """Registers the data set, returns a previous incarnation's shards, starts heartbeating."""
        self.client.add_dataset(self.dataset)
        returned = self.client.fail_worker(self.client.worker)
        if returned:
            logger.info("Returned %d shard(s) a previous run of %s still held.", returned, self.client.worker)
        self._heartbeat = threading.Thread(target=self._beat, name="shard-heartbeat", daemon=True)
        self._heartbeat.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def leave(self) -> None:
        """Stops heartbeating and tells the service this process's training is over (a normal end), so its
        shards go back at once instead of after a heartbeat timeout that reads as a failure."""
        self.stop()
        try:
            self.client.leave()
        except ShardServiceError as e:
            logger.info("Could not tell the shard service that %s is done (%s); it finds out when the "
                        "heartbeats stop.", self.client.worker, e)

    def _beat(self) -> None:
        while not self._stop.wait(self._heartbeat_secs):
            try:
                self.client.heartbeat()
            except ShardServiceError as e:
                logger.warning("Shard service heartbeat failed: %s", e)

    def batches(self, reader: readers.ElasticReader, batch_size: int) -> Iterator[tuple]:
        """(record numbers, texts, [shard id, lease, first record, records]) per batch of each assigned shard."""
        for start, end, tag in self.ranges(batch_size):
            yield (np.arange(start + 1, end + 1, dtype=np.int64),
                   np.asarray(reader.read_lines(start, end), dtype=object), tag)

    def ranges(self, batch_size: int, batches_per_range: int = 1) -> Iterator[tuple[int, int, np.ndarray]]:
        """(first record, end, [shard id, lease, first record, records]) per range of each assigned shard: a range
        is `batches_per_range` batches (fewer at the shard's end), and its batches start every `batch_size` records
        from the shard's first.

        Each call is a new iterator of the input (the first, or one re-created with its session after a parameter
        server failed): the shards an earlier one held, and had queued batches of, go back first, or they would
        stay out with no one training them and every worker would wait for them.
        """
        with self._lock:
            self._generation += 1
            generation = self._generation
        returned = self.client.fail_worker(self.client.worker)
        if returned:
            logger.info("Returned %d shard(s) that %s's previous input held.", returned, self.client.worker)
        waited_since = None
        next_log = 0.0
        while True:
            decision = self.client.request(self.dataset.name)
            if isinstance(decision, Assigned) and generation != self._generation:
                self.client.release(self.dataset.name, decision.shard_id, decision.lease)  # a newer iterator runs
                return
            if isinstance(decision, Finished):
                return
            if isinstance(decision, Failed):
                raise ReaderError(f"{decision.message} {BAD_RECORDS_HINT}")
            if isinstance(decision, Drained):
                logger.info("The last shards of %s are %s's own; its input ends once they are trained.",
                            self.dataset.name, self.client.worker)
                return
            if isinstance(decision, Wait) and self.synchronous and not decision.opening:
                logger.info("The remaining shards of %s are other workers'; %s's input ends, and it steps along "
                            "with them until theirs end.", self.dataset.name, self.client.worker)
                return
            if not isinstance(decision, Assigned):
                now = time.monotonic()
                waited_since = waited_since or now
                if now - waited_since > self._wait_timeout:
                    raise ReaderError(
                        f"waited {self._wait_timeout:.0f}s for a shard of {self.dataset.name!r}; other workers hold "
                        "every remaining shard and none came back. Is a worker stuck?")
                if now >= next_log:
                    logger.info("All shards of %s are out; waiting for other workers to finish theirs.",
                                self.dataset.name)
                    next_log = now + 10.0
                if self._reporter is not None:
                    self._reporter.settle()  # this process's last batch may be what the others wait for
                time.sleep(0.2)
                continue
            waited_since = None
            for start in range(decision.start, decision.end, batch_size * batches_per_range):
                if not self.is_current(decision.lease):
                    break
                end = min(decision.end, start + batch_size * batches_per_range)
                yield start, end, np.asarray([decision.shard_id, decision.lease, start, end - start], dtype=np.int64)

    def report_bad(self, records: list[tuple[str, str]], limit: int) -> tuple[int, str | None]:
        """Adds malformed records (where, why) to the job-wide count the service keeps; returns that count and,
        past `limit`, why the data set failed."""
        return self.client.bad_records(self.dataset.name, records, limit)

    def is_current(self, lease: int) -> bool:
        """False for a lease the service took back: refused in a report, or older than its lease floor."""
        floor = self.client.lease_floor
        with self._lock:
            abandoned = lease in self._abandoned
        return not abandoned and (floor is None or ShardBook.is_current(lease, floor))

    def lease_floor_and_refused(self) -> tuple[int, list[int]]:
        """What `is_current` goes by, for `report_ring.lease_check`: the newest lease floor (NO_FLOOR before the
        service told one), and the leases the service refused that the floor does not cover."""
        floor = self.client.lease_floor
        with self._lock:
            refused = [lease for lease in self._abandoned if floor is None or ShardBook.is_current(lease, floor)]
        return (report_ring.NO_FLOOR if floor is None else floor), refused

    def reporter(self) -> ReportQueue:
        """A training's reporter: what it puts goes out in its steps, and while this feed's input waits for
        shards (no step may come until another worker's shard is done, and that may wait for this one's)."""
        self._reporter = ReportQueue(self._start_report)
        return self._reporter

    def _start_report(self, report: tuple[int, int, int, int]) -> Callable[[], None]:
        """Sends one report of trained records; returns what waits for it to count. A hand-out the service took
        back (after a rewind) is dropped."""
        shard_id, lease, offset, records = report
        try:
            counted = self.client.start_report(self.dataset.name, shard_id, records, lease=lease, offset=offset)
        except ShardServiceError as e:
            self._refused(e, shard_id, lease)
            return lambda: None
        if not self._reported:
            # Said as the first report leaves, right after the call that trained the batch: a report in a ring is
            # as good as counted, and its acknowledgement may be waited for only when the job ends.
            self._reported = True
            logger.info("%s trained its first batch (shard %d of %s).", self.client.worker, shard_id,
                        self.dataset.name)

        def acknowledged() -> None:
            try:
                counted()
            except ShardServiceError as e:
                self._refused(e, shard_id, lease)

        return acknowledged

    def _refused(self, error: ShardServiceError, shard_id: int, lease: int) -> None:
        if not isinstance(error, LeaseTakenBackError):
            raise error
        with self._lock:
            self._abandoned.add(lease)
        logger.info("Shard %d (lease %d) of %s was taken back by the service (a rewind, or this process was "
                    "silent too long); dropping it.", shard_id, lease, self.dataset.name)
        # Learn the lease floor now, not at the next heartbeat: if the service gave up on this process, every
        # shard it holds went back, and the batches of those still queued must not be trained either.
        try:
            self.client.heartbeat()
        except ShardServiceError as refresh:
            logger.info("Could not ask the shard service for its lease floor (%s).", refresh)


class ShardReportHook(tf.compat.v1.train.SessionRunHook):
    """Reports each batch's records to the service after the call that trained them, through the report
    channel of this process's transport (elastic/report_channel.py): the next call's writes wait until they
    are in, and a call whose batch the service took back meanwhile is withdrawn before it writes anything.

    Built from the training step (`ShardReportHook.step_hook(feed)`): it gets the step's shard tags, one row
    per step of the call.
    """

    @classmethod
    def step_hook(cls, feed: ShardFeed) -> StepHook:
        """The hook for a training: automatically sized calls keep one step each, so that a failure replays at
        most one batch and each batch's lease is checked right before its step writes."""
        return StepHook(lambda step: cls(feed, step), several_steps_per_call=False)

    def __init__(self, feed: ShardFeed, step: TrainingStep):
        if SHARD_TAG not in step.outputs:
            raise ReaderError("ShardReportHook: the input declares no shard tags; use a ShardedInput of the "
                              "ShardFeed.")
        self._feed = feed
        self._finished = step.finished_outputs.get(SHARD_TAG)
        self._in_call = False
        # The ring is asked for once, here: later the client's report_ring may wait for its line, busy with a call.
        ring = feed.client.report_ring if step.train_op is not None else None
        self._channel = open_channel(feed.reporter(), feed, ring, step.train_op, step.outputs[SHARD_TAG])

    def after_create_session(self, session, coord):
        self._channel.new_session()

    def before_run(self, run_context):
        self._in_call = True
        fetch = self._channel.before_call(run_context.session)
        return None if fetch is None else tf.compat.v1.train.SessionRunArgs(fetch)

    def after_run(self, run_context, run_values):
        self._in_call = False
        self._channel.after_call(run_values.results)

    def end(self, session):
        if self._in_call and self._finished is not None:
            # The last call of several steps ended part way, when the input ran out: its finished steps
            # trained their batches, but the call returned no tags.
            self._channel.put(session.run(self._finished))
        try:
            self._channel.close()  # the last reports, before the service hears this process is done
        finally:
            self._feed.leave()


class ShardSealListener(tf.compat.v1.train.CheckpointSaverListener):
    """Chief: seals the shard book right before each save and commits it under the saved step."""

    def __init__(self, client: ShardClient):
        self._client = client
        self._seal: int | None = None

    def before_save(self, session, global_step_value):
        self._seal = self._client.seal(checkpoint_step=int(global_step_value))

    def after_save(self, session, global_step_value):
        self._client.commit(self._seal, int(global_step_value))


class ShardRestoreHook(tf.compat.v1.train.SessionRunHook):
    """Chief: rewinds the shard book to seal N whenever a session restores checkpoint N, and lets the
    service hand out shards once the model is back.

    Before the first session restores the model, the book is rewound and the hook
    waits (up to `wait_secs`) until the workers that held shards at the seal have
    heard of it: a worker that kept training against the parameter servers then
    drops the batches of taken-back leases instead of training them into the
    restored model. (A worker that held no shard has no such batches.) A session
    re-created later (after a ps failure) is rewound as soon as it exists.

    N is the step in the restored checkpoint's file name, the step its seal was
    committed under (the global step variable inside may be a little ahead,
    when workers kept training while the chief saved).
    """

    # Before the checkpoint saver, which saves (and seals) as soon as a session is created: the
    # book must already be back at the restored checkpoint when that happens.
    runs_first = True

    def __init__(self, client: ShardClient, model_dir: str, wait_secs: float = 10.0):
        self._client = client
        self._model_dir = model_dir
        self._wait_secs = wait_secs
        self._created = 0

    def begin(self):
        if self._rewind("before restoring"):
            self._await_workers()

    def after_create_session(self, session, coord):
        self._created += 1
        if self._created > 1:
            self._rewind(f"session {self._created}")
        self._client.open()

    def _rewind(self, when: str) -> bool:
        step = CheckpointDir(self._model_dir).newest_saved_step()
        if step is None:
            return False
        try:
            self._client.restore(step)
        except ShardServiceError as e:
            logger.warning("Could not rewind the shard book to step %d: %s", step, e)
            return False
        logger.info("Shard book at the seal of checkpoint step %d (%s).", step, when)
        return True

    def _await_workers(self) -> None:
        deadline = time.monotonic() + self._wait_secs
        while unheard := self._client.unheard():
            if time.monotonic() >= deadline:
                logger.warning("%s did not call the shard service within %.0fs of the rewind; restoring the model "
                               "anyway (a worker still alive may train a batch the rewind gave back).",
                               ", ".join(unheard), self._wait_secs)
                return
            time.sleep(0.05)
