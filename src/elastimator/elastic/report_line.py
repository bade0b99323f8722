"""The report line: a worker's calls on the training path (a report per step, a shard request every few steps) to
the shard service over a plain TCP connection.

A trainer reports once per step, and over gRPC each call costs about 340 µs
of the service's CPU and 200 µs of the worker's (Python gRPC's own work per
call), taken from the cores that train. On a connection of its own, framed as
4-byte big-endian lengths before UTF-8 JSON, the same report costs some 25 µs
on each side.

The line carries `report` and `request` calls (`LINE_METHODS`); every other
call, and any call the line could not deliver, goes over gRPC. Both are safe to
send again: the book knows each report by its lease and first record, and the
service answers a request sent again (the same `request_id`) with the shard it
handed out the first time. A connection opens with a hello frame,
`{"token": ..., "worker": ...}`, answered with the methods the line takes,
`{"methods": [...]}` (an older service answers `{}`: reports only), or with an
error before the server closes it. The server binds the same host as the gRPC
endpoint (loopback unless configured), reads JSON only, and refuses frames
over `MAX_FRAME_BYTES`.
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import threading
from typing import Callable

from elastimator.elastic.shards import TOKEN_REFUSED, ShardServiceError

logger = logging.getLogger("elastimator")

MAX_FRAME_BYTES = 1 << 20
"""A report is some 150 bytes; anything this large is not one of ours."""
HELLO_TIMEOUT_SECS = 10.0
"""An unauthenticated connection that says nothing this long is dropped."""
MAX_CONNECTIONS = 1024
"""One per worker; past this many at once, new connections are closed (their reports go over gRPC)."""
LINE_METHODS = ("report", "request")
"""The calls the line carries: those a trainer makes every step or every few."""
_LENGTH = struct.Struct(">I")


class FrameError(Exception):
    """The peer closed the connection or sent something that is not a frame of ours."""


def send_frame(sock: socket.socket, message: dict) -> None:
    body = json.dumps(message).encode("utf-8")
    sock.sendall(_LENGTH.pack(len(body)) + body)


def read_frame(stream) -> dict:
    """The next JSON object from a connection's binary file; FrameError when it closed or sent garbage."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise FrameError("the connection closed")
    (length,) = _LENGTH.unpack(head)
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"a frame of {length} bytes; the limit is {MAX_FRAME_BYTES}")
    body = stream.read(length)
    if len(body) < length:
        raise FrameError("the connection closed mid-frame")
    try:
        message = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise FrameError(f"a frame that is not JSON: {e}") from None
    if not isinstance(message, dict):
        raise FrameError(f"a frame that is not a JSON object: {type(message).__name__}")
    return message


class ReportLineServer:
    """Accepts report lines and answers each call with `handle(method, request)`.

    Args:
        handle: The service's call handler (`ShardService.handle`).
        check_token: Whether a hello's token is the job's.
        host, port: Where to listen; port 0 picks a free one (`port` holds it once started).
    """

    def __init__(self, handle: Callable[[str, dict], dict], check_token: Callable[[str | None], bool],
                 host: str = "127.0.0.1", port: int = 0):
        self._handle = handle
        self._check_token = check_token
        host = host.strip("[]")  # an IPv6 host as gRPC spells it
        self._listener = socket.create_server((host, port), family=_family(host))
        self.port: int = self._listener.getsockname()[1]
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = False
        self.answered = 0
        """Calls answered so far (refusals included)."""

    def start(self) -> "ReportLineServer":
        threading.Thread(target=self._accept_loop, name="report-line-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            connections = list(self._connections)
        _close(self._listener)
        for connection in connections:
            _close(connection)

    def _accept_loop(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed: stop()
            with self._lock:
                if self._stopped:
                    _close(connection)
                    return
                if len(self._connections) >= MAX_CONNECTIONS:
                    logger.warning("The report line has %d connections open; closing one more from %s.",
                                   MAX_CONNECTIONS, _peer(connection))
                    _close(connection)
                    continue
                self._connections.add(connection)
            threading.Thread(target=self._serve, args=(connection,), name="report-line", daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        peer = _peer(connection)
        try:
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            stream = connection.makefile("rb")
            connection.settimeout(HELLO_TIMEOUT_SECS)
            hello = read_frame(stream)
            token, peer = hello.get("token"), hello.get("worker") or _peer(connection)
            if not isinstance(token, str) or not self._check_token(token):
                send_frame(connection, {"error": f"UNAUTHENTICATED: {TOKEN_REFUSED}"})
                return
            send_frame(connection, {"methods": list(LINE_METHODS)})
            connection.settimeout(None)
            while True:
                send_frame(connection, self._answer(read_frame(stream)))
        except (FrameError, OSError) as e:  # a worker that ended or died, or a peer that is not one
            if not self._stopped:
                logger.debug("Report line from %s ended: %s", peer, e)
        finally:
            with self._lock:
                self._connections.discard(connection)
            _close(connection)

    def _answer(self, request: dict) -> dict:
        with self._lock:
            self.answered += 1
        method = request.pop("method", None)
        if method not in LINE_METHODS:
            return {"error": f"INVALID_ARGUMENT: the report line takes {' and '.join(map(repr, LINE_METHODS))} "
                             f"calls only; got {method!r}. Other calls go over gRPC."}
        try:
            return self._handle(method, request)
        except ShardServiceError as e:
            return {"error": f"{e.status}: {e}"}


class ReportLine:
    """A worker's end: sends calls, and reads the service's replies in the order the calls went out.

    A call's reply may be read later than it is sent (`send`, then `reply`): the
    round trip then overlaps what the caller does in between.

    Raises:
        ConnectionError: The line could not be opened or broke (the caller goes over gRPC instead).
        ShardServiceError: The service refused the token or the call.
    """

    def __init__(self, host: str, port: int, token: str, worker: str, timeout_secs: float = 30.0,
                 connect_timeout_secs: float = 2.0):
        self._sent = 0
        self._read = 0
        self._unclaimed: dict[int, dict] = {}
        """Replies read before their callers asked for them (a later call's caller asked first)."""
        try:
            self._sock = socket.create_connection((host.strip("[]"), port), timeout=connect_timeout_secs)
            self._sock.settimeout(timeout_secs)  # a service that went silent without closing (a cut network)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            self._stream = self._sock.makefile("rb")
        except OSError as e:
            raise ConnectionError(f"no report line to {host}:{port}: {e}") from None
        try:
            hello = self.reply(self.send({"token": token, "worker": worker}), "report line")
        except ConnectionError as e:  # already closed
            raise ConnectionError(f"no report line to {host}:{port}: {e}") from None
        except ShardServiceError:  # the token refused: the server has closed its end
            self.close()
            raise
        self.methods = frozenset(hello.get("methods", ["report"]))
        """The calls this line takes (an older service's: reports only)."""

    def send(self, message: dict) -> int:
        """Sends one frame; returns its number, for `reply`."""
        try:
            send_frame(self._sock, message)
        except OSError as e:
            self._broke(e)
        self._sent += 1
        return self._sent

    def reply(self, number: int, method: str = "report") -> dict:
        """The reply to the frame `send` numbered `number` (read once); `method` names the call in an error."""
        while self._read < number:
            try:
                self._unclaimed[self._read + 1] = read_frame(self._stream)
            except (FrameError, OSError) as e:
                self._broke(e)
            self._read += 1
        reply = self._unclaimed.pop(number)
        if "error" in reply:
            raise ShardServiceError(f"shard service {method} failed: {reply['error']}")
        return reply

    def _broke(self, error: Exception):
        self.close()
        raise ConnectionError(f"the report line broke: {error}") from None

    def close(self) -> None:
        _close(self._sock)


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _peer(connection: socket.socket) -> str:
    try:
        return "%s:%s" % connection.getpeername()[:2]
    except OSError:
        return "a closed connection"


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
