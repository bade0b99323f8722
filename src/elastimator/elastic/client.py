"""The shard service's client: every call a worker (or the launcher) makes, over gRPC or in process.

Messages are JSON objects; every call carries the job token. A call is retried
while the service is unreachable (a chief restarting), for up to `retry_secs`.
Reports and shard requests go over the service's report line
(elastic/report_line_client.py) where it has one and this process can reach it, else
over gRPC; a call the line could not deliver is sent again over gRPC. A trainer
on the service's machine (and the chief, in process) writes its reports into a
report ring (elastic/report_ring.py) instead: shared memory the service reads.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import secrets
import threading
import time
from typing import Any, Callable

import grpc

from elastimator.elastic.report_ring import ReportRing, RingReader, wait_unsealed
from elastimator.elastic.report_line_client import ReportLine
from elastimator.elastic.report_line_codec import LINE_METHODS, LOCAL_SOCKETS
from elastimator.elastic.service import KEEPALIVE_MS, METHODS, SERVER_METHODS, SERVICE, TOKEN_HEADER, ShardService
from elastimator.elastic.shards import (Assigned, ShardBook, ShardingSpec, Drained, Failed, Finished,
                                        ShardServiceError, Wait, error_for)

logger = logging.getLogger("elastimator")

KEEPALIVE_TIMEOUT_MS = 5_000
KEEPALIVE_OPTIONS = (("grpc.keepalive_time_ms", KEEPALIVE_MS), ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
                     ("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0))
"""Clients ping every 10 s and drop a connection that does not answer within 5 s; the server allows it."""

BEST_EFFORT_METHODS = frozenset({"leave"})
"""Tried once, briefly: a process on its way out must not wait for a service that may be stopping too."""
BEST_EFFORT_TIMEOUT_SECS = 5.0
LINE_TIMEOUT_SECS = (KEEPALIVE_MS + KEEPALIVE_TIMEOUT_MS) / 1000
"""A report line silent this long is given up, and the report goes over gRPC: as long as gRPC's keepalive
takes to find a peer gone (a cut network). A reply normally takes under a millisecond."""


class _GrpcTransport:
    """Calls a remote service: JSON over gRPC, retried while the service is unreachable; reports and shard requests
    over the report line while it works."""

    def __init__(self, address: str, token: str, timeout_secs: float, retry_secs: float, worker: str,
                 report_line: bool):
        self._address = address
        self._token = token
        self._worker = worker
        self._timeout = timeout_secs
        self._retry_secs = retry_secs
        self._metadata = ((TOKEN_HEADER, token),)
        self._line: ReportLine | None = None
        self._line_wanted = report_line
        """False once the line could not be opened: this process reaches the service over gRPC only."""
        self._line_lock = threading.Lock()
        self.line_reports = 0
        self._ring: ReportRing | None = None
        """The report ring the first line took (`report_ring`): reports go there while that line lasts."""
        self._ring_usable = False
        self._ring_tried = not (report_line and LOCAL_SOCKETS)
        # Reconnect quickly when the service comes back with a restarted chief (gRPC's default backoff grows
        # to minutes): a worker must hear of the rewind before the chief restores the model.
        # Keepalive pings find a connection whose peer vanished while the network was cut (its closing never
        # arrived): without them, every call waits on it until TCP gives up, some 15 minutes later.
        self._channel = grpc.insecure_channel(address, options=[
            ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 1000), *KEEPALIVE_OPTIONS])
        self._calls = {m: self._channel.unary_unary(f"/{SERVICE}/{m}") for m in METHODS + SERVER_METHODS}

    def start(self, method: str, request: dict) -> Callable[[], dict]:
        """Makes a call; returns what reads its reply. A call over the line is read when asked for, so its
        round trip overlaps whatever the caller does meanwhile; one over gRPC is answered before this returns."""
        if method in LINE_METHODS and self._line_wanted:
            with self._line_lock:
                line = self._line or self._open_line()
                if line is not None and method in line.methods:
                    try:
                        number = line.send({"method": method, **request})
                        return lambda: self._line_reply(line, number, method, request)
                    except ConnectionError as e:
                        self._line_broke(e)
        reply = self._over_grpc(method, request)
        return lambda: reply

    def report_ring(self) -> ReportRing | None:
        """This process's report ring, or None where its reports are answered: the first call opens the report
        line with it, and keeps it only where the service took it (a line over the Unix socket)."""
        with self._line_lock:
            if not self._ring_tried:
                self._ring_tried = True
                ring = ReportRing.create() if self._line is None and self._line_wanted else None
                if ring is not None:
                    line = self._open_line(ring)
                    if line is not None and line.took_ring:
                        self._ring, self._ring_usable = ring, True
                    else:
                        ring.close()
            return self._ring

    def put_report(self, request: dict) -> bool:
        """Writes a report into the ring; False where it must go answered (no ring, or the line that took it broke,
        or the ring is full or closed)."""
        if self._ring is None:
            return False
        put = _put(self._ring, request, self._ring_usable)
        if put:
            self.line_reports += 1
        return put

    def _line_reply(self, line: ReportLine, number: int, method: str, request: dict) -> dict:
        with self._line_lock:
            try:
                reply = line.reply(number, method)
                if method == "report":
                    self.line_reports += 1
                return reply
            except ConnectionError as e:
                self._line_broke(e)
        # Sent again: the book counts a report delivered twice once, and a request with the same id gets the
        # shard it was handed the first time.
        return self._over_grpc(method, request)

    def _line_broke(self, error: ConnectionError) -> None:
        # The service restarted (with the chief) or the network broke: gRPC waits for the service to come back,
        # and the next call on the line asks for it again.
        logger.info("%s; this call goes over gRPC.", error)
        self._ring_usable = False  # the service stops reading the ring as the line closes: reports are answered
        self._line = None

    def _open_line(self, ring: ReportRing | None = None) -> ReportLine | None:
        """The service's report line (offered the report ring `ring`), or None (and gRPC from now on) where it has
        none or this process cannot reach it."""
        try:
            where = self._over_grpc("report_line", {})
            if where.get("port") is None:
                raise ConnectionError(f"the shard service at {self._address} has no report line")
            self._line = ReportLine(self._address.rpartition(":")[0], where["port"], self._token, self._worker,
                                    timeout_secs=min(self._timeout, LINE_TIMEOUT_SECS),
                                    local_name=where.get("local"), ring=ring)
        except (ConnectionError, ShardServiceError) as e:
            logger.info("%s; this process reports over gRPC.", e)
            self._line_wanted = False
        return self._line

    def _over_grpc(self, method: str, request: dict) -> dict:
        payload = json.dumps(request).encode("utf-8")
        once = method in BEST_EFFORT_METHODS
        deadline = time.monotonic() + (0.0 if once else self._retry_secs)
        timeout = min(self._timeout, BEST_EFFORT_TIMEOUT_SECS) if once else self._timeout
        while True:
            try:
                raw = self._calls[method](payload, timeout=timeout, metadata=self._metadata, wait_for_ready=True)
                return json.loads(raw.decode("utf-8"))
            except grpc.RpcError as e:
                retry = e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                if not retry or time.monotonic() >= deadline:
                    raise error_for(e.code().name,
                                    f"shard service {method} failed: {e.code().name}: {e.details()}") from None
                logger.info("Shard service unreachable (%s); retrying %s.", e.code().name, method)
                time.sleep(0.5)

    def close(self) -> None:
        with self._line_lock:
            if self._line is not None:
                self._line.close()
            if self._ring is not None:
                self._ring.close()
        self._channel.close()


class _InProcessTransport:
    """Calls a service living in this process (the chief's): no serialization, no network, same errors. Its
    reports go into a report ring the service reads, as a worker's on the service's machine do."""

    def __init__(self, service: ShardService, worker: str):
        self._service = service
        self._worker = worker
        self._ring: ReportRing | None = None
        self._reader: RingReader | None = None
        self._ring_tried = False

    def start(self, method: str, request: dict) -> Callable[[], dict]:
        reply = self._service.handle(method, request)
        return lambda: reply

    line_reports = 0

    def report_ring(self) -> ReportRing | None:
        if not self._ring_tried:
            self._ring_tried = True
            ring = ReportRing.create()
            if ring is not None:
                self._reader = RingReader.open(ring.path)
                ring.forget_path()
                if self._reader is not None:
                    self._service.attach_ring(self._worker, self._reader)
                    self._ring = ring
                else:
                    ring.close()
        return self._ring

    def put_report(self, request: dict) -> bool:
        return self._ring is not None and _put(self._ring, request)

    def close(self) -> None:
        if self._ring is not None:
            self._service.detach_ring(self._worker, self._reader)
            self._ring.close()


def _put(ring: ReportRing, request: dict, usable: bool = True) -> bool:
    """Writes a report call's request into `ring` where it can go there (a `usable` ring, a report with a lease);
    whether it went there (`ring.armed`: else the host waits for its reply before the next call)."""
    lease = request.get("lease")
    put = usable and lease is not None and ring.put(request["dataset"], request["shard_id"], lease, request["offset"],
                                         request["consumed"])
    ring.armed = put
    return put


class ShardClient:
    """A worker's (or the chief's) connection to the shard service.

    Calls that find the service unreachable (it is restarting with the chief)
    are retried for up to `retry_secs`; every call is safe to repeat. The
    process that hosts the service talks to it directly (`in_process`).
    """

    def __init__(self, address: str, token: str, worker: str, timeout_secs: float = 30.0,
                 retry_secs: float = 120.0, report_line: bool = True):
        self.worker = worker
        self._transport: _GrpcTransport | _InProcessTransport = _GrpcTransport(
            address, token, timeout_secs, retry_secs, worker, report_line)
        self._init_call_state()

    def _init_call_state(self) -> None:
        self._request_ids = secrets.token_hex(8)
        """Makes this client's request ids its own: a restarted worker of the same name counts from 1 again."""
        self._request_count = itertools.count(1)
        self.lease_floor: int | None = None
        """The newest lease floor the service's replies told (None before the first)."""
        self._floor_call = 0
        """The call whose reply told `lease_floor` (calls are numbered as they start)."""
        self._calls_started = 0
        self._floor_lock = threading.Lock()

    @classmethod
    def in_process(cls, service: ShardService, worker: str) -> "ShardClient":
        """A client of a service in this process: the same calls, without gRPC's per-call cost."""
        client = cls.__new__(cls)
        client.worker = worker
        client._transport = _InProcessTransport(service, worker)
        client._init_call_state()
        return client

    def call(self, method: str, **request: Any) -> dict:
        return self._start(method, request)()

    def _start(self, method: str, request: dict) -> Callable[[], dict]:
        """Makes a call; returns what reads its reply (and learns the lease floor from it)."""
        request.setdefault("worker", self.worker)
        with self._floor_lock:
            self._calls_started += 1
            started = self._calls_started
        reply_of = self._transport.start(method, request)

        def reply() -> dict:
            answer = reply_of()
            self._take_floor(answer.get("lease_floor"), started)
            return answer

        return reply

    def _take_floor(self, floor: int | None, started: int) -> None:
        """Keeps the newest lease floor. Calls run on several threads (reports, heartbeats), so a reply can come
        back after a later call's: within one run of the service the floor only rises, and the higher one is
        kept; across runs, the floor of the call started last."""
        if floor is None:
            return
        with self._floor_lock:
            current = self.lease_floor
            if current is None or (floor >= current if ShardBook.same_incarnation(floor, current)
                                   else started > self._floor_call):
                self.lease_floor, self._floor_call = floor, started

    @property
    def report_ring(self) -> ReportRing | None:
        """This process's report ring (elastic/report_ring.py): where it is, reports go there and the training step
        checks it; None where they are answered (over TCP or gRPC, or no /dev/shm)."""
        return self._transport.report_ring()

    @property
    def reports_over_line(self) -> int:
        """How many reports the service's report line delivered (the rest went over gRPC or in process)."""
        return self._transport.line_reports

    def add_dataset(self, spec: ShardingSpec) -> None:
        self.call("add_dataset", dataset=dataclasses.asdict(spec))

    def request(self, dataset: str) -> Assigned | Wait | Drained | Finished | Failed:
        """The next shard of `dataset` for this worker. The request carries an id of its own: sent again (its reply
        was lost), it gets the same shard."""
        reply = self.call("request", dataset=dataset, request_id=f"{self._request_ids}-{next(self._request_count)}")
        if reply["decision"] == "assigned":
            return Assigned(reply["shard_id"], reply["epoch"], reply["start"], reply["end"], reply["lease"])
        if reply["decision"] == "failed":
            return Failed(reply["message"])
        if reply["decision"] == "wait":
            return Wait(opening=bool(reply.get("opening")))
        return Drained() if reply["decision"] == "drained" else Finished()

    def bad_records(self, dataset: str, records: list[tuple[str, str]], limit: int) -> tuple[int, str | None]:
        """Adds malformed records (where, why) to the job-wide count; returns it, and why the data set failed
        once the count passes `limit`."""
        reply = self.call("bad_records", dataset=dataset, records=[list(r) for r in records], limit=limit)
        return reply["count"], reply["failure"]

    def report(self, dataset: str, shard_id: int, consumed: int, *, offset: int, lease: int | None = None) -> None:
        """Reports trained records; while the chief saves a checkpoint, waits for it (see the module doc)."""
        self.start_report(dataset, shard_id, consumed, offset=offset, lease=lease)()

    def start_report(self, dataset: str, shard_id: int, consumed: int, *, offset: int, lease: int | None = None,
                     poll_secs: float = 0.01) -> Callable[[], None]:
        """Sends a report (into the report ring, where this process has one); returns what waits until the service
        has counted it. Over the report line the reply is read only then; while the chief saves a checkpoint, the
        report is sent again until it counts (one in the ring waits for the seal's commit)."""
        request = {"dataset": dataset, "shard_id": shard_id, "consumed": consumed, "lease": lease, "offset": offset}
        if self._transport.put_report(request):
            ring = self._transport.report_ring()
            return lambda: wait_unsealed(ring, self.heartbeat)
        first = self._start("report", dict(request))

        def answered() -> None:
            reply = first()
            while reply.get("sealing"):
                time.sleep(poll_secs)
                reply = self.call("report", **request)

        return answered

    def release(self, dataset: str, shard_id: int, lease: int) -> bool:
        """Gives back a shard this worker holds and will not train."""
        return self.call("release", dataset=dataset, shard_id=shard_id, lease=lease)["released"]

    def heartbeat(self) -> None:
        self.call("heartbeat")

    def leave(self) -> int:
        """This worker's training ended on purpose: its unfinished shards go back now, with no warning."""
        return self.call("leave")["returned"]

    def fail_worker(self, worker: str) -> int:
        return self.call("fail_worker", failed_worker=worker)["returned"]

    def seal(self, checkpoint_step: int | None = None) -> int:
        return self.call("seal", checkpoint_step=checkpoint_step)["seal_id"]

    def commit(self, seal_id: int, checkpoint_step: int) -> None:
        self.call("commit", seal_id=seal_id, checkpoint_step=checkpoint_step)

    def restore(self, checkpoint_step: int) -> None:
        self.call("restore", checkpoint_step=checkpoint_step)

    def open(self) -> None:
        """Chief: the model is at the checkpoint the service resumed from; hand out shards again."""
        self.call("open")

    def status(self, dataset: str) -> dict:
        return self.call("status", dataset=dataset)

    def unheard(self) -> list[str]:
        """The workers whose shards the last rewind took back and that have not called the service since."""
        return self.call("unheard")["unheard"]

    def close(self) -> None:
        self._transport.close()
