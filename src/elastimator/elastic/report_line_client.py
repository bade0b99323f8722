"""The report line's worker end: sends a worker's reports and shard requests over a plain socket to the service's
line (`report_line_server.py`), and reads the replies in order (the frames are `report_line_codec.py`'s)."""

from __future__ import annotations

import json
import socket

from elastimator.elastic.report_line_codec import (LOCAL_SOCKETS, FrameError, close_socket, json_object, pack_report,
                                                   read_body, send_body, tune, unpack_reply)
from elastimator.elastic.report_ring import ReportRing
from elastimator.elastic.shards import ShardServiceError, error_for


class ReportLine:
    """A worker's end: sends calls, and reads the service's replies in the order the calls went out.

    A call's reply may be read later than it is sent (`send`, then `reply`): the
    round trip then overlaps what the caller does in between.

    Raises:
        ConnectionError: The line could not be opened or broke (the caller goes over gRPC instead).
        ShardServiceError: The service refused the token or the call.
    """

    def __init__(self, host: str, port: int, token: str, worker: str, timeout_secs: float = 30.0,
                 connect_timeout_secs: float = 2.0, local_name: str | None = None, ring: ReportRing | None = None):
        self._worker = worker
        self._packs_reports = False
        """Whether reports go packed: where the hello offered it."""
        self.took_ring = False
        """Whether the service took this worker's report ring (elastic/report_ring.py), and reads it while the
        line is open."""
        self._sent = 0
        self._read = 0
        self._unclaimed: dict[int, dict] = {}
        """Replies read before their callers asked for them (a later call's caller asked first)."""
        self._sock = _connect_local(local_name, connect_timeout_secs)
        self.local = self._sock is not None
        """Whether the line runs over the service's Unix socket (this process shares its machine)."""
        try:
            if self._sock is None:
                self._sock = socket.create_connection((host.strip("[]"), port), timeout=connect_timeout_secs)
            self._sock.settimeout(timeout_secs)  # a service that went silent without closing (a cut network)
            tune(self._sock)
            self._stream = self._sock.makefile("rb")
        except OSError as e:
            raise ConnectionError(f"no report line to {host}:{port}: {e}") from None
        greeting = {"token": token, "worker": worker}
        if ring is not None and self.local:
            greeting["ring"] = ring.path
        try:
            hello = self.reply(self.send(greeting), "report line")
        except ConnectionError as e:  # already closed
            raise ConnectionError(f"no report line to {host}:{port}: {e}") from None
        except ShardServiceError:  # the token refused: the server has closed its end
            self.close()
            raise
        finally:
            if ring is not None:
                ring.forget_path()  # the service has it open, or never will
        self.methods = frozenset(hello.get("methods", ["report"]))
        """The calls this line takes (an older service's: reports only)."""
        self._packs_reports = "report" in hello.get("packed", ())
        self.took_ring = hello.get("ring") is True

    def send(self, message: dict) -> int:
        """Sends one call (`{"method": ..., **request}`); returns its number, for `reply`. A report goes packed
        where the service takes it so."""
        body = None
        if self._packs_reports and message.get("method") == "report" and message.get("worker") == self._worker:
            body = pack_report(message)
        try:
            send_body(self._sock, body or json.dumps(message).encode("utf-8"))
        except OSError as e:
            self._broke(e)
        self._sent += 1
        return self._sent

    def reply(self, number: int, method: str = "report") -> dict:
        """The reply to the frame `send` numbered `number` (read once); `method` names the call in an error."""
        while self._read < number:
            try:
                body = read_body(self._stream)
                self._unclaimed[self._read + 1] = unpack_reply(body) if body[:1] == b"A" else json_object(body)
            except (FrameError, OSError) as e:
                self._broke(e)
            self._read += 1
        reply = self._unclaimed.pop(number)
        if "error" in reply:
            raise error_for(reply.get("status", ""), f"shard service {method} failed: {reply['error']}")
        return reply

    def _broke(self, error: Exception):
        self.close()
        raise ConnectionError(f"the report line broke: {error}") from None

    def close(self) -> None:
        close_socket(self._sock)


def _connect_local(name: str | None, timeout_secs: float) -> socket.socket | None:
    """A connection to the abstract Unix socket `name`, or None where this process cannot reach it (another
    machine or network namespace, or no name)."""
    if not (name and LOCAL_SOCKETS):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_secs)
        sock.connect("\0" + name)
    except OSError:
        sock.close()
        return None
    return sock
