"""The report line's wire: how a worker's calls on the training path (a report per step, a shard request every
few steps) and their replies travel a plain socket connection to the shard service (TCP, or a Unix socket on the
service's machine). The server's loop is `report_line_server.py`, the worker's end `report_line_client.py`.

A trainer reports once per step, and a gRPC call's own work in Python costs both the service and the worker
far more CPU than the report itself, taken from the cores that train. On a connection of its own, framed as
4-byte big-endian lengths before UTF-8 JSON, the same report costs a small fraction of that on each side
(figures: docs/performance.md, bench/results/elastic_cpu.md).

Reports and their replies, one each per step, may also travel packed: a frame
whose body starts with `R` holds a report's four numbers (`PACKED_REPORT`)
and its data set's name, one that starts with `A` a reply's lease floor and
whether a seal holds the report (`PACKED_REPLY`). Inside a training step this
code runs cold, and JSON was a large share of a report's CPU on the worker: a
service offers packed reports in its hello (`"packed": ["report"]`), and a
worker uses them only where offered. Errors are always JSON. The server's
native loop (`_line_native.c`) reads and answers the same packed frames.

A worker on the service's machine sends no report over the line at all: it
names a report ring in its hello (`"ring": path`, over the Unix socket only),
writes its reports there, and the service reads them (elastic/report_ring.py).
The service answers `"ring": true` where it took the ring, reads it while the
line is open, and takes what it holds one last time as the line closes.

The line carries `report` and `request` calls (`LINE_METHODS`); every other
call, and any call the line could not deliver, goes over gRPC. Both are safe to
send again: the book knows each report by its lease and first record, and the
service answers a request sent again (the same `request_id`) with the shard it
handed out the first time. A connection opens with a hello frame,
`{"token": ..., "worker": ...}`, answered with the methods the line takes,
`{"methods": [...], "packed": [...]}` (an older service answers `{}`: reports
only, in JSON), or with an error before the server closes it. Only JSON and
packed reports are read (never pickle), and frames over `MAX_FRAME_BYTES` are refused.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
from typing import Iterator

from elastimator.elastic.shards import ShardServiceError

MAX_FRAME_BYTES = 1 << 20
"""A report is some 150 bytes; anything this large is not one of ours."""
LINE_METHODS = ("report", "request")
"""The calls the line carries: those a trainer makes every step or every few."""
PACKED_METHODS = ("report",)
"""The calls the line may carry packed, where the hello offers them."""
LOCAL_SOCKETS = sys.platform.startswith("linux")
"""Whether the line also takes workers on the service's machine over an abstract Unix socket (Linux has them)."""
LENGTH = struct.Struct(">I")
"""A frame's first 4 bytes: its body's length."""
PACKED_REPORT = struct.Struct(">cqqqq")
"""b"R", shard id, records, lease, first record; the data set's name (UTF-8) follows."""
PACKED_REPLY = struct.Struct(">c?q")
"""b"A", whether a seal holds the report (send it again), the lease floor."""
_FRAMED_REPLY = struct.Struct(">Ic?q")
"""A packed reply with its frame's length before it (`framed_reply`)."""


class FrameError(Exception):
    """The peer closed the connection or sent something that is not a frame of ours."""


def send_frame(sock: socket.socket, message: dict) -> None:
    send_body(sock, json.dumps(message).encode("utf-8"))


def frame(body: bytes) -> bytes:
    """`body` as it goes on the line: its length (4 bytes, big-endian), then it."""
    return LENGTH.pack(len(body)) + body


def send_body(sock: socket.socket, body: bytes) -> None:
    sock.sendall(frame(body))


def read_frame(stream) -> dict:
    """The next JSON object from a connection's binary file; FrameError when it closed or sent garbage."""
    return json_object(read_body(stream))


def read_body(stream) -> bytes:
    head = stream.read(LENGTH.size)
    if len(head) < LENGTH.size:
        raise FrameError("the connection closed")
    length = body_length(head)
    body = stream.read(length)
    if len(body) < length:
        raise FrameError("the connection closed mid-frame")
    return body


def body_length(received) -> int:
    """The length a frame's first 4 bytes give; FrameError past MAX_FRAME_BYTES."""
    (length,) = LENGTH.unpack_from(received)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"a frame of {length} bytes; the limit is {MAX_FRAME_BYTES}")
    return length


class FrameBuffer:
    """What a non-blocking connection has received, handed out a whole frame's body at a time."""

    __slots__ = ("_received",)

    def __init__(self):
        self._received = bytearray()

    def add(self, chunk: bytes) -> None:
        self._received += chunk

    @property
    def empty(self) -> bool:
        """Whether nothing is held: no part of a frame waits for the rest of it."""
        return not self._received

    def whole(self, chunk: bytes) -> bool:
        """Whether `chunk` is one whole frame, with nothing received before it (the usual case: read it as it is,
        without adding it); FrameError for one over MAX_FRAME_BYTES."""
        return not self._received and len(chunk) >= LENGTH.size and len(chunk) == LENGTH.size + body_length(chunk)

    def bodies(self, chunk: bytes) -> Iterator[bytes]:
        """Adds `chunk`, then yields the bodies of the whole frames received (FrameError as `next_body`, after the
        frames before it). A chunk that is one `whole` frame is not copied into the buffer."""
        if self.whole(chunk):
            yield chunk[LENGTH.size:]
            return
        self._received += chunk
        while (body := self.next_body()) is not None:
            yield body

    def next_body(self) -> bytes | None:
        """The next whole frame's body received, or None; FrameError for one over MAX_FRAME_BYTES."""
        if len(self._received) < LENGTH.size:
            return None
        end = LENGTH.size + body_length(self._received)
        if len(self._received) < end:
            return None
        body = bytes(self._received[LENGTH.size:end])
        del self._received[:end]
        return body


def json_object(body: bytes) -> dict:
    try:
        message = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # nested too deep for the parser
        raise FrameError(f"a frame that is not JSON: {e!s:.200}") from None
    if not isinstance(message, dict):
        raise FrameError(f"a frame that is not a JSON object: {type(message).__name__}")
    return message


def pack_report(request: dict) -> bytes | None:
    """A report call's packed body, or None for one that cannot travel packed (a report without a lease)."""
    numbers = (request.get("shard_id"), request.get("consumed"), request.get("lease"), request.get("offset"))
    dataset = request.get("dataset")
    if not (all(type(n) is int and -2**63 <= n < 2**63 for n in numbers) and isinstance(dataset, str)):
        return None
    return PACKED_REPORT.pack(b"R", *numbers) + dataset.encode("utf-8")


def unpack_report(body: bytes, worker: str) -> tuple[str, str, int, int, int, int]:
    """The report a packed body holds, as `worker` (the line's, from its hello) made it: its fields in the order
    `ShardService.report_batch` takes them (`worker`, `dataset`, `shard_id`, `consumed`, `lease`, `offset`)."""
    if len(body) < PACKED_REPORT.size:
        raise FrameError(f"a packed report of {len(body)} bytes; it takes at least {PACKED_REPORT.size}")
    _, shard_id, consumed, lease, offset = PACKED_REPORT.unpack_from(body)
    try:
        dataset = body[PACKED_REPORT.size:].decode("utf-8")
    except UnicodeDecodeError as e:
        raise FrameError(f"a packed report whose data set name is not UTF-8: {e}") from None
    return worker, dataset, shard_id, consumed, lease, offset


def framed_reply(sealing: bool, lease_floor: int) -> bytes:
    """A report's reply as it goes on the line, packed: whether a seal holds the report (send it again) and the
    lease floor, after the frame's length (packed at once: the server sends one per report)."""
    return _FRAMED_REPLY.pack(PACKED_REPLY.size, b"A", sealing, lease_floor)


def unpack_reply(body: bytes) -> dict:
    if len(body) != PACKED_REPLY.size:
        raise FrameError(f"a packed reply of {len(body)} bytes; expected {PACKED_REPLY.size}")
    _, sealing, floor = PACKED_REPLY.unpack(body)
    return {"sealing": True, "lease_floor": floor} if sealing else {"lease_floor": floor}


def reply_data(reply) -> bytes:
    """A counted report's reply as it goes on the line: packed, or the JSON error the book refused it with."""
    if isinstance(reply, ShardServiceError):
        return frame(json.dumps({"error": f"{reply.status}: {reply}", "status": reply.status}).encode("utf-8"))
    return framed_reply(*reply)


def tune(sock: socket.socket) -> None:
    """A TCP connection sends each frame at once and finds a vanished peer; a Unix one needs neither."""
    if sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


def close_socket(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
