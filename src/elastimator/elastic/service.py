"""The shard service: the shard book behind a gRPC endpoint (its client is `elastic/client.py`).

Messages are JSON objects (never pickle). Every call carries the job token in
the `x-elastimator-token` metadata; a wrong or missing token is refused with
UNAUTHENTICATED. By default the server listens on 127.0.0.1 only. Workers' reports,
one per training step, may instead take the report line (`elastic/report_line_server.py`)
on the same host, which checks the same token.

Workers also heartbeat; a worker silent for `worker_timeout_secs` is treated as
failed and its shards go back (from what it reported) to the queue.

Between a seal and its commit (while the chief saves a checkpoint) reports from
other workers are answered "sealing" and the client asks again. A worker held
in its report cannot start another step, so the checkpoint holds at most one
batch per worker that its seal does not know of: the bound on what a rewind to
that checkpoint replays.

Trainers on the service's machine write their reports into report rings
(elastic/report_ring.py) instead, which the service takes into the book
(`_drain`) before every call it handles, before a seal, before it fails a
worker, as a ring's line closes, and every `ShardServer.drain_every_secs`.
A seal first marks the other trainers' rings SEALING (their writes wait, as a
report answered "sealing" waits), then drains every ring; the rings marked are
not drained again until the commit.

Every reply to a worker carries the book's lease floor, so a worker learns of a
rewind on its next call (a heartbeat at the latest) and drops the batches of
taken-back leases it still holds. Before the chief puts the model back to a
checkpoint it waits until the workers that held shards at that checkpoint's
seal have heard the floor of the rewind (`unheard`), so no stale batch is
trained into the restored model.

Whether a seal holds reports, and whether shards are handed out, is one value,
the seal phase (open, sealing, resuming: `seal_phase.py`, a pure transition
function). A call is decided under the book's lock (`ShardService.decide`),
which returns its reply and its effects, the seal files to write
(`WritePending`, `WriteCommitted`); `handle` writes them (`seal_store.py`)
after the lock is released and before the call is answered, one at a time,
while reports of other workers are answered "sealing" until the commit. So a
seal holds the lock only while it snapshots the book. Every report, over JSON,
packed or from a ring, is counted by one method (`_count`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hmac
import json
import logging
import secrets
import threading
import time
from concurrent import futures
from typing import Callable, NamedTuple, Sequence, Union

import grpc

from elastimator._validate import is_int
from elastimator.elastic import model_dir_files, seal_phase
from elastimator.elastic.report_line_server import ReportLineServer
from elastimator.elastic.report_ring import RingReader
from elastimator.elastic.seal_store import SealStore
from elastimator.elastic.shards import (
    Assigned,
    ShardingSpec,
    Drained,
    Failed,
    Finished,
    InvalidRequestError,
    ShardBook,
    ShardServiceError,
    TOKEN_REFUSED,
)

logger = logging.getLogger("elastimator")

REAPED_NAMED = 20
"""The most silent workers the reaper's warning names (it counts the rest)."""
SERVICE = "elastimator.ShardService"
TOKEN_HEADER = "x-elastimator-token"


@dataclasses.dataclass(frozen=True)
class WritePending:
    """An effect: write the seal `seal_id`'s state as checkpoint `step`'s pending seal (`SealStore.write_pending`)."""

    step: int
    seal_id: int
    state: dict


@dataclasses.dataclass(frozen=True)
class WriteCommitted:
    """An effect: write checkpoint `step`'s committed seal (`SealStore.write`)."""

    step: int
    state: dict


Effect = Union[WritePending, WriteCommitted]


class Outcome(NamedTuple):
    """What a call decided under the book's lock: its reply, and the seal files to write once the lock is released
    and before the reply goes out (`ShardService.handle` writes them, in order). (A named tuple: one is made per
    call, at a fraction of a frozen dataclass's cost.)"""

    reply: dict
    effects: tuple[Effect, ...] = ()


class Report(NamedTuple):
    """One report, however it came (JSON, packed, a ring): `worker` trained `consumed` records of its shard
    `shard_id` from record `offset`, under `lease` (None: a report over JSON without one)."""

    worker: str
    dataset: str
    shard_id: int
    consumed: int
    lease: int | None
    offset: int


class ShardService:
    """The book, a lock, worker liveness, the seal phase and seal persistence; transport-agnostic.

    Every call runs as `decide(method, request)` under the lock, which returns an `Outcome` (the reply, and the
    seal files to write as effects); `handle` is that, then the effects. The seal phase (open, sealing, resuming:
    `seal_phase.py`) is one value, changed only by `_enter`. Every report, whatever brought it, is counted by
    `_count`; one answered (over JSON, `_report`, or packed, `report_batch`) is first checked against the phase
    (`_holds`).

    Args:
        token: The job token every call must carry.
        seal_store: Where committed seals are persisted (None keeps them in memory).
        worker_timeout_secs: Silence after which a worker counts as failed.
        clock: Seconds, monotonic; injectable for tests.
        seal_timeout_secs: The longest reports wait for a seal's commit (a chief that died mid-save never commits).
    """

    def __init__(self, token: str, seal_store: SealStore | None = None, worker_timeout_secs: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, book: ShardBook | None = None,
                 seal_timeout_secs: float = 30.0):
        if not token:
            raise ShardServiceError("the shard service needs a non-empty job token.")
        self.token = token
        self.book = book or ShardBook(incarnation=secrets.randbelow(2**31))
        self.seals = seal_store
        self.worker_timeout_secs = worker_timeout_secs
        self._clock = clock
        self.seal_timeout_secs = seal_timeout_secs
        self._lock = threading.Lock()
        self._phase: seal_phase.Phase = seal_phase.Open()
        """Whether a seal holds reports, and whether shards are handed out (`seal_phase.py`); only `_enter` sets it."""
        self._disk = threading.Lock()
        """Orders the seal files' writes."""
        self._last_seen: dict[str, float] = {}
        self._told_finished: set[str] = set()
        self._told_drained: set[str] = set()
        """Workers told to end their input and finish the last shards, which they hold."""
        self._heard: set[str] = set()
        """Workers that have been told the lease floor since the last rewind."""
        self._holders: set[str] = set()
        """Workers whose shards the last rewind took back."""
        self._handed: dict[str, tuple[tuple[str, str], dict]] = {}
        """Per worker, its last request that got a shard ((data set, request id)) and the reply: a request sent again
        gets the same shard."""
        self._rings: dict[str, list[RingReader]] = {}
        """The report rings of trainers on this machine, by worker (a restarted worker's next to its old one's for
        a moment)."""
        self._handlers: dict[str, Callable[[dict], Outcome]] = {
            "add_dataset": self._add_dataset, "request": self._request, "report": self._report,
            "bad_records": self._bad_records, "release": self._release, "heartbeat": self._heartbeat,
            "leave": self._leave, "fail_worker": self._fail_worker, "seal": self._seal, "commit": self._commit,
            "restore": self._restore, "status": self._status, "open": self._open_for_shards,
            "unheard": self._unheard,
        }

    @property
    def phase(self) -> seal_phase.Phase:
        """The seal phase now (read-only: a snapshot)."""
        return self._phase

    def resume(self, checkpoint_step: int | None) -> bool:
        """At start: rewinds to the seal of the checkpoint training resumes from, if there is one.

        Raises:
            ShardServiceError: for a corrupted seal file (never silently starts over).
        """
        if self.seals is None or checkpoint_step is None or not self.seals.any_for(checkpoint_step):
            return False
        state = self.seals.read(checkpoint_step)
        with self._lock:
            self._rewind(checkpoint_step, state)
            # Workers that kept training against the parameter servers must not get new shards until the
            # chief has put the model back to this checkpoint: what they trained before that is wiped.
            self._enter(seal_phase.Resumed())
        logger.info("Shard service resumed from the seal of checkpoint step %d; shards wait for the chief's "
                    "restore.", checkpoint_step)
        return True

    def check_token(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.token.encode())

    def handle(self, method: str, request: dict) -> dict:
        """Runs one call: decides it (`decide`), then writes the seal files it asks for, after the lock and before
        the answer. Raises ShardServiceError for requests the book refuses."""
        outcome = self.decide(method, request)
        for effect in outcome.effects:
            self._apply(effect)
        return outcome.reply

    def decide(self, method: str, request: dict) -> Outcome:
        """Runs one call under the book's lock; its reply and the seal files it asks for (not written yet).

        Raises:
            ShardServiceError: for requests the book refuses (no effect is then asked for).
        """
        handler = self._handlers.get(method)
        if handler is None:
            raise InvalidRequestError(f"unknown method {method!r}; expected one of {list(METHODS)}.")
        worker = _field(request, "worker", str) if request.get("worker") is not None else None
        with self._lock:
            self._drain()
            outcome = handler(request)
            if worker is not None and method != "leave":
                outcome.reply["lease_floor"] = self._heard_from(worker, self._clock())
        return outcome

    def report_batch(self, reports: Sequence[tuple[str, str, int, int, int, int]]) -> list:
        """Counts the reports the report line read in one turn of its loop, under one hold of the lock, each as
        `handle("report", ...)` counts one: per report (`worker`, `dataset`, `shard_id`, `consumed`, `lease`,
        `offset`; packed, so the numbers are ints already), its reply (whether a seal holds it, the lease floor)
        or the ShardServiceError the book refused it with."""
        replies: list = []
        with self._lock:
            self._drain()
            now = self._clock()
            for report in reports:  # (a packed report's reply, as `_report` answers one over JSON)
                held = self._holds(report[0])
                if not held:
                    try:
                        self._count(*report)
                    except ShardServiceError as e:
                        replies.append(e)
                        continue
                replies.append((held, self._heard_from(report[0], now)))
        return replies

    def _count(self, worker: str, dataset: str, shard_id: int, consumed: int, lease: int | None,
               offset: int) -> None:
        """Counts one report (`Report`'s fields) in the book: the one path every report takes (over JSON, packed,
        or from a ring). Fields that are not what they must be are refused here, naming the field."""
        if not (dataset and min(shard_id, consumed, offset) >= 0 and (lease is None or lease >= 0)):
            _checked_report(Report(worker, dataset, shard_id, consumed, lease, offset)._asdict())  # raises
        self.book.report(dataset, worker, shard_id, consumed, lease=lease, offset=offset)

    def _heard_from(self, worker: str, now: float) -> int:
        """Notes that `worker` is alive as of `now`; the lease floor its reply carries."""
        self._last_seen[worker] = now
        self._heard.add(worker)
        return self.book.lease_floor_for(worker)

    def _holds(self, worker: str | None) -> bool:
        """Whether the seal phase holds `worker`'s reports; a seal past its timeout is ended first."""
        phase = self._phase
        if type(phase) is not seal_phase.Sealing:  # (once per report: the common case first, and cheap)
            return False
        if phase.lapsed(self._clock(), self.seal_timeout_secs):
            logger.warning("%s sealed the shard book but did not commit within %.0fs; taking reports again.",
                           phase.sealer, self.seal_timeout_secs)
            self._enter(seal_phase.Ended(phase.seal_id))
        return self._phase.holds(worker)

    def _enter(self, event: seal_phase.Event) -> None:
        """The seal phase after `event` (`seal_phase.step`), and the rings marked as it holds them."""
        before, self._phase = self._phase, seal_phase.step(self._phase, event)
        if before != self._phase:
            self._mark_rings()

    def _mark_rings(self, holds: Callable[[str], bool] | None = None) -> None:
        """Marks each ring SEALING where `holds` (by default the phase) holds its worker's reports."""
        holds = holds or self._phase.holds
        for worker, rings in self._rings.items():
            for ring in rings:
                ring.seal(holds(worker))

    def _apply(self, effect: Effect) -> None:
        """Writes one seal file (the lock released); a pending seal that could not be written holds nothing."""
        if self.seals is None:
            return
        try:
            with self._disk:
                if isinstance(effect, WritePending):
                    self.seals.write_pending(effect.step, effect.state)
                else:
                    self.seals.write(effect.step, effect.state)
        except BaseException:
            if isinstance(effect, WritePending):
                with self._lock:
                    self._enter(seal_phase.Ended(effect.seal_id))
            raise

    # --- report rings (elastic/report_ring.py) -----------------------------------------------

    def attach_ring(self, worker: str, ring: RingReader) -> None:
        """Reads `worker`'s report ring from now on (until `detach_ring`)."""
        with self._lock:
            self._rings.setdefault(worker, []).append(ring)
            ring.seal(self._phase.holds(worker))

    def detach_ring(self, worker: str, ring: RingReader) -> None:
        """Stops reading a ring (its line closed): what it holds is counted first."""
        with self._lock:
            ring.close(self._ring_counter(worker))
            rings = self._rings.get(worker, [])
            if ring in rings:
                rings.remove(ring)
            if not rings:
                self._rings.pop(worker, None)

    def drain_reports(self) -> None:
        """Takes the reports in every ring into the book (a ring a pending seal holds waits for its commit)."""
        with self._lock:
            self._drain()

    def _drain(self, workers=None) -> None:
        for worker in self._rings if workers is None else workers:
            if not self._holds(worker):
                self._drain_rings_of(worker)

    def _drain_rings_of(self, worker: str) -> None:
        count = self._ring_counter(worker)
        for ring in self._rings.get(worker, ()):
            ring.drain(count)

    def _ring_counter(self, worker: str):
        def count(dataset: str, shard_id: int, lease: int, first: int, records: int) -> None:
            try:
                self._count(worker, dataset, shard_id, records, lease, first)
            except ShardServiceError as e:  # a lease taken back: its records went back with it
                logger.info("A report in %s's ring was not counted: %s", worker, e)
        return count

    def unfinished_workers(self) -> list[str]:
        """Live workers that have not yet been told their data set is finished (or, told to drain, still train)."""
        with self._lock:
            self._drain()
            drained = {w for w in self._told_drained if not self.book.holds(w)}
            return sorted(set(self._last_seen) - self._told_finished - drained)

    def reap(self) -> list[str]:
        """Fails the workers that have been silent too long; returns their names."""
        now = self._clock()
        with self._lock:
            silent = [w for w, seen in self._last_seen.items() if now - seen > self.worker_timeout_secs]
            self._drain(silent)
            returned = self.book.fail_workers(silent)
            for worker in silent:
                del self._last_seen[worker]
        if len(silent) == 1:
            logger.warning("Worker %s stopped heartbeating; %d shard(s) went back to the queue.", silent[0],
                           returned[silent[0]])
        elif silent:  # one line however many: a rack that goes down takes hundreds of workers at once
            more = f" and {len(silent) - REAPED_NAMED} more" if len(silent) > REAPED_NAMED else ""
            logger.warning("%d workers stopped heartbeating (%s%s); %d shard(s) went back to the queue.",
                           len(silent), ", ".join(silent[:REAPED_NAMED]), more, sum(returned.values()))
        return silent

    # --- methods: each returns its Outcome ----------------------------------------------------

    def _add_dataset(self, request) -> Outcome:
        fields = {f.name for f in dataclasses.fields(ShardingSpec)}
        required = {f.name for f in dataclasses.fields(ShardingSpec) if f.default is dataclasses.MISSING}
        spec = request.get("dataset")
        if not isinstance(spec, dict):
            raise InvalidRequestError(f"field 'dataset' must be an object with {sorted(required)} (and optionally "
                                      f"{sorted(fields - required)}); got {spec!r:.200}.")
        unknown, missing = sorted(set(spec) - fields), sorted(required - set(spec))
        if unknown or missing:
            raise InvalidRequestError(f"field 'dataset' has unknown field(s) {unknown} and lacks {missing}; it "
                                      f"takes {sorted(fields)}.")
        try:
            checked = ShardingSpec(**spec)
        except ShardServiceError as e:
            raise InvalidRequestError(f"field 'dataset': {e}") from None
        self.book.add_dataset(checked)
        return Outcome({})

    def _open_for_shards(self, request) -> Outcome:
        self._enter(seal_phase.Opened())
        return Outcome({})

    def _request(self, request) -> Outcome:
        worker = _field(request, "worker", str)
        dataset = _field(request, "dataset", str)
        request_id = _optional(request, "request_id", str)
        handed = self._handed.get(worker)
        if request_id is not None and handed is not None and handed[0] == (dataset, request_id):
            # The same request again: its reply was lost (a line that broke, a deadline passed). The shard it
            # handed out, if still the worker's, is the answer; a second one would stay out with no one to train it.
            shard = handed[1]
            if self.book.leased(dataset, worker, shard["shard_id"], shard["lease"]):
                return Outcome(dict(shard))
        if not self._phase.hands_out:
            return Outcome({"decision": "wait", "opening": True})
        decision = self.book.request(dataset, worker)
        if isinstance(decision, Assigned):
            reply = {"decision": "assigned", **vars(decision)}  # (its fields: ints; asdict took a third of a request)
            if request_id is not None:
                self._handed[worker] = ((dataset, request_id), reply)
            return Outcome(dict(reply))
        if isinstance(decision, Finished):
            self._told_finished.add(worker)
            return Outcome({"decision": "finished"})
        if isinstance(decision, Drained):
            self._told_drained.add(worker)
            return Outcome({"decision": "drained"})
        if isinstance(decision, Failed):
            return Outcome({"decision": "failed", "message": decision.message})
        return Outcome({"decision": "wait"})

    def _bad_records(self, request) -> Outcome:
        records = request.get("records")
        if not isinstance(records, list) or not all(
                isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in records):
            raise InvalidRequestError(f"field 'records' must be a list of [where, why] strings; got {records!r:.200}.")
        limit = _field(request, "limit", int, minimum=0)
        count, failure = self.book.report_bad(_field(request, "dataset", str), [tuple(r) for r in records], limit)
        if failure is not None and records:
            logger.error("Data set %s failed: %s", request["dataset"], failure)
        return Outcome({"count": count, "failure": failure})

    def _report(self, request) -> Outcome:
        if self._holds(request.get("worker")):  # whatever it says: it is sent again after the commit
            return Outcome({"sealing": True})
        self._count(*_checked_report(request))
        return Outcome({})

    def _release(self, request) -> Outcome:
        released = self.book.release(_field(request, "dataset", str), _field(request, "worker", str),
                                     _field(request, "shard_id", int, minimum=0),
                                     _field(request, "lease", int, minimum=0))
        return Outcome({"released": released})

    def _heartbeat(self, request) -> Outcome:
        _field(request, "worker", str)
        return Outcome({})

    def _leave(self, request) -> Outcome:
        worker = _field(request, "worker", str)
        self._last_seen.pop(worker, None)
        returned = self.book.fail_worker(worker)
        if returned:
            logger.info("%s ended its training; %d shard(s) it had begun went back to the queue.", worker,
                        returned)
        return Outcome({"returned": returned})

    def _fail_worker(self, request) -> Outcome:
        failed = _field(request, "failed_worker", str)
        self._last_seen.pop(failed, None)
        return Outcome({"returned": self.book.fail_worker(failed)})

    def _seal(self, request) -> Outcome:
        step = _optional(request, "checkpoint_step", int, minimum=0)
        sealer = request.get("worker") or ""
        # The other trainers' rings are marked first, then drained: a report written before its trainer saw the
        # mark is in this seal, and after it the trainer writes at most once more before its gate waits.
        self._mark_rings(lambda worker: worker != sealer)
        for worker in self._rings:
            self._drain_rings_of(worker)
        try:
            with _no_gc_pass():
                seal_id = self.book.seal()
        except BaseException:
            self._enter(seal_phase.Ended())
            self._mark_rings()  # no seal: nothing holds the writes
            raise
        # Only a seal that was made holds other workers' reports until its commit.
        self._enter(seal_phase.Sealed(sealer, seal_id, self._clock()))
        if step is None or self.seals is None or self.book.is_committed(step):
            return Outcome({"seal_id": seal_id})
        return Outcome({"seal_id": seal_id}, (WritePending(step, seal_id, self.book.pending(seal_id)),))

    def _commit(self, request) -> Outcome:
        step = _field(request, "checkpoint_step", int, minimum=0)
        seal_id = _field(request, "seal_id", int, minimum=0)
        new = not self.book.is_committed(step)
        try:
            state = self.book.commit(seal_id, step)
        finally:
            self._enter(seal_phase.Ended())
            self._drain()
        return Outcome({}, (WriteCommitted(step, state),) if new and self.seals is not None else ())

    def _restore(self, request) -> Outcome:
        step = _field(request, "checkpoint_step", int, minimum=0)
        self._rewind(step, self.seals.read(step) if self.seals is not None else None)
        return Outcome({})

    def _rewind(self, checkpoint_step: int, state: dict | None) -> None:
        """Rewinds the book (dropping any pending seal) and starts over on who has heard of it."""
        self._holders = self.book.restore(checkpoint_step, committed=state)
        self._enter(seal_phase.Ended())
        self._heard.clear()

    def _unheard(self, request) -> Outcome:
        return Outcome({"unheard": sorted(self._holders - self._heard - {request.get("worker")})})

    def _status(self, request) -> Outcome:
        return Outcome(self.book.status(_field(request, "dataset", str)))


METHODS = ("add_dataset", "request", "report", "bad_records", "release", "heartbeat", "leave", "fail_worker", "seal",
           "commit", "restore", "status", "open", "unheard")
SERVER_METHODS = ("report_line",)
"""Calls about the server rather than the book: `report_line` answers where the report line listens: its port
(None for none) and, for workers on this machine, its Unix socket's name (`local`)."""


KEEPALIVE_MS = 10_000



@contextlib.contextmanager
def _no_gc_pass():
    """No collection of Python's cycle collector starts inside: one due then runs once the book's lock is released.

    A seal lists every shard in flight (5,000 dicts at 5,000 workers); a full collection those allocations set
    off took the seal's hold of the lock from 2-3 ms to 12-17 ms (bench/seal_hold.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _field(request: dict, name: str, kind: type, minimum: int | None = None):
    """The request's field `name`, checked: an int (>= `minimum`, not a bool) or a non-empty string.

    Raises:
        InvalidRequestError: naming the field, what it must be and what came.
    """
    value = request.get(name)
    if kind is int:
        if not is_int(value, minimum=minimum):
            bound = "" if minimum is None else f" >= {minimum}"
            raise InvalidRequestError(f"field {name!r} must be an int{bound}; got {value!r:.100}.")
    elif not isinstance(value, kind) or (kind is str and not value):
        what = "a non-empty string" if kind is str else f"a {kind.__name__}"
        raise InvalidRequestError(f"field {name!r} must be {what}; got {value!r:.100}.")
    return value


def _optional(request: dict, name: str, kind: type, minimum: int | None = None):
    """`_field`, where the field may be missing or null (None then)."""
    return None if request.get(name) is None else _field(request, name, kind, minimum)


def _checked_report(request: dict) -> Report:
    """A report call's fields, checked (`offset`, the batch's first record, is required over the wire: it is what
    makes a retried report count once).

    Raises:
        InvalidRequestError: naming the field, what it must be and what came.
    """
    return Report(_field(request, "worker", str), _field(request, "dataset", str),
                  _field(request, "shard_id", int, minimum=0), _field(request, "consumed", int, minimum=0),
                  _optional(request, "lease", int, minimum=0), _field(request, "offset", int, minimum=0))


class ShardServer:
    """Serves a ShardService over gRPC (JSON messages) and a report line, and reaps silent workers.

    Args:
        service: The book and its locks.
        host, port: Where gRPC listens; port 0 picks a free one.
        report_port: Where the report line (elastic/report_line_server.py) listens on the same host: 0 picks a
            free one, None serves reports over gRPC only.

    Example:
        >>> server = ShardServer(ShardService(token="s3cret")).start()
        >>> client = ShardClient(server.address, token="s3cret", worker="worker-0")
    """

    def __init__(self, service: ShardService, host: str = "127.0.0.1", port: int = 0, max_workers: int = 16,
                 reap_every_secs: float = 1.0, report_port: int | None = 0, drain_every_secs: float = 0.05):
        self.service = service
        self._host, self._port = host, port
        self._report_port = report_port
        self.report_line: ReportLineServer | None = None
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=[
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
            ("grpc.http2.max_ping_strikes", 0)])
        handlers = {
            method: grpc.unary_unary_rpc_method_handler(self._make_handler(method))
            for method in METHODS + SERVER_METHODS
        }
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self._stop = threading.Event()
        self._reap_every = reap_every_secs
        self.drain_every_secs = drain_every_secs
        """How often the report rings are read while no call comes."""
        self.address = ""

    def _make_handler(self, method: str):
        def handle(raw: bytes, context: grpc.ServicerContext) -> bytes:
            token = dict(context.invocation_metadata()).get(TOKEN_HEADER)
            if not self.service.check_token(token):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, TOKEN_REFUSED)
            try:
                request = json.loads(raw.decode("utf-8"))
                if not isinstance(request, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError, RecursionError) as e:  # nested too deep for the parser
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"request is not a JSON object: {e!s:.200}")
            try:
                if method == "report_line":
                    line = self.report_line
                    reply = {"port": line.port, "local": line.local_name} if line is not None else {"port": None}
                else:
                    reply = self.service.handle(method, request)
            except ShardServiceError as e:
                context.abort(getattr(grpc.StatusCode, e.status), str(e))
            return json.dumps(reply).encode("utf-8")

        return handle

    def start(self) -> "ShardServer":
        try:
            port = self._server.add_insecure_port(f"{self._host}:{self._port}")
        except RuntimeError:  # newer grpcio raises where older ones returned 0
            port = 0
        if port == 0:
            raise ShardServiceError(f"the shard service could not listen on {self._host}:{self._port}: the port is "
                                    "in use (or the address is not this machine's). Choose another --port, or 0 "
                                    "for any free one.")
        self.address = f"{self._host}:{port}"
        if self._report_port is not None:
            try:
                self.report_line = ReportLineServer(self.service.handle, self.service.check_token,
                                                    self.service.report_batch, self._host, self._report_port,
                                                    rings=self.service).start()
            except OSError as e:
                self._server.stop(None)
                raise ShardServiceError(f"the shard service's report line could not listen on {self._host}:"
                                        f"{self._report_port}: {e}. Choose another report port, or 0 for any "
                                        "free one.") from None
        self._server.start()
        threading.Thread(target=self._reap_loop, name="shard-reaper", daemon=True).start()
        threading.Thread(target=self._drain_loop, name="shard-ring-drain", daemon=True).start()
        logger.info("Shard service listening on %s%s.", self.address,
                    f" (report line on port {self.report_line.port})" if self.report_line else "")
        return self

    def _reap_loop(self) -> None:
        while not self._stop.wait(self._reap_every):
            self.service.reap()

    def _drain_loop(self) -> None:
        # Keeps the book near the rings' reports while no call comes (a worker waiting for the last shards asks
        # every 0.2 s): 20 wake-ups a second, where a report over the line woke the service at every step.
        while not self._stop.wait(self.drain_every_secs):
            self.service.drain_reports()

    def drain(self, timeout_secs: float = 60.0, poll_secs: float = 0.1) -> list[str]:
        """Waits until every live worker has heard the data is finished (or went silent); returns stragglers."""
        deadline = time.monotonic() + timeout_secs
        while (waiting := self.service.unfinished_workers()) and time.monotonic() < deadline:
            time.sleep(poll_secs)
        if waiting:
            logger.warning("Stopping the shard service although %s never asked for more data.", ", ".join(waiting))
        return waiting

    def stop(self, grace: float | None = 1.0) -> None:
        self._stop.set()
        if self.report_line is not None:
            self.report_line.stop()
        self._server.stop(grace).wait()


def serve(model_dir: str, token: str, host: str = "127.0.0.1", port: int = 0, worker_timeout_secs: float = 30.0,
          keep_seals: int | None = 10, report_port: int | None = 0) -> ShardServer:
    """Starts a job's shard service, resumed from the seal of model_dir's newest checkpoint (if any)."""
    service = ShardService(token, SealStore(model_dir, keep=keep_seals), worker_timeout_secs=worker_timeout_secs)
    service.resume(model_dir_files.newest_saved_step(model_dir))
    return ShardServer(service, host=host, port=port, report_port=report_port).start()
