"""The report line's server: one event loop that accepts every worker's line and answers its calls (the frames
are `report_line_codec.py`'s).

The server binds the same host as the gRPC endpoint (loopback unless configured). A worker on the service's own
machine takes the line over a Unix socket. On Linux the server also listens on an abstract Unix socket of a
random name, which the service tells its workers with the port (`"local"`). Abstract names belong to one network
namespace, so only a process that shares the service's machine and network reaches it: a worker of a local
cluster; a worker in a pod of its own does not, and takes TCP. Any process there may connect; the hello's token
is checked as over TCP. Over loopback TCP the sender's system call also runs the receiver's protocol work, so
each send costs more.

On Linux the thread that serves the line (one event loop for all) runs as SCHED_BATCH. A report arriving
then does not preempt the thread that sent it: on a machine whose cores the
trainers and the service share, that thread is a trainer's main thread, between
two training calls. The reply goes out at the kernel's next scheduling point
instead, while the worker's next step computes.

The send is on the step's serial path (the hook's `after_run`), which is why both the Unix socket and the
SCHED_BATCH thread are used: each shortened the worker's send under training (bench/results/elastic_cpu.md).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import select
import selectors
import socket
import threading
import time
from typing import Callable

from elastimator.elastic import open_files
from elastimator.elastic.report_line_codec import (LENGTH, LINE_METHODS, LOCAL_SOCKETS, PACKED_METHODS, FrameBuffer,
                                                   FrameError, close_socket, frame, json_object, reply_data, tune,
                                                   unpack_report)
from elastimator.elastic.report_ring import RingReader
from elastimator.elastic.shards import TOKEN_REFUSED, ShardServiceError

try:  # the loop's native wait, read and answer (_line_native.c), where the install could build it
    from elastimator.elastic import _line_native
except ImportError:
    _line_native = None

logger = logging.getLogger("elastimator")

HELLO_TIMEOUT_SECS = 10.0
"""An unauthenticated connection that says nothing this long is dropped."""
MAX_CONNECTIONS = 16384
"""One per worker; past this many at once, new connections are closed (their reports go over gRPC)."""
RESERVED_FILES = 256
"""Open files the service keeps for itself beyond its workers' connections: seal files, listeners, logs."""
PAUSE_SECS = 1.0
"""How long the line stops accepting after the process ran out of open files."""
WARN_EVERY_SECS = 10.0
"""The least time between two warnings that connections were closed or could not be accepted."""
NATIVE = _line_native is not None and os.environ.get("ELASTIMATOR_NATIVE_LINE", "1") != "0"
"""Whether report lines run their native loop: built by the install, and not turned off (ELASTIMATOR_NATIVE_LINE=0)."""


class ReportLineServer:
    """Accepts report lines and answers each call with `handle(method, request)`.

    One thread serves every line: an event loop over the listeners and the open connections (`selectors`, epoll
    on Linux). A thread per connection cost the service a thread switch and a GIL hand-over per report, which at
    a thousand workers was most of its CPU (bench/results/shard_service_scale.md); the loop reads whatever
    frames have arrived on each ready connection and answers them in turn.

    Open files: the server raises the process's soft limit as far as its lines need (`open_files`), takes at
    most half of it less `RESERVED_FILES` (a worker's gRPC channel needs one too, and a seal a file), and closes
    connections past that. Should the process run out anyway, it stops accepting for `PAUSE_SECS` rather than
    retry at once, and says what to raise.

    The packed reports a turn of the loop reads, from every connection, are counted together
    (`reports`: one hold of the service's lock for all), and answered in the order each connection sent its
    frames: a frame of another kind first has the reports read before it counted.

    Where the install built `_line_native` (C, Linux), a turn's wait, the reads of lone packed reports and
    their replies' sends run there: the connections it may read are those past their hello that report packed,
    with no part of a frame held and no reply waiting (`_mark`); whatever else it meets comes back to this
    loop as it was, with the bytes it read. At a thousand connections that was most of the loop's own CPU per
    report (bench/results/shard_service_scale.md).

    Args:
        handle: The service's call handler (`ShardService.handle`).
        check_token: Whether a hello's token is the job's.
        reports: Counts packed reports together (`ShardService.report_batch`).
        host, port: Where to listen; port 0 picks a free one (`port` holds it once started).
        local: Whether to listen on an abstract Unix socket too (Linux only), for workers on this machine.
        rings: Where the report rings of workers on the Unix socket go while their lines are open (the
            `ShardService`: `attach_ring(worker, reader)`, `detach_ring(worker, reader)`); None takes none.
        native: Whether to run the native loop where it was built; None: as `NATIVE` says.
    """

    def __init__(self, handle: Callable[[str, dict], dict], check_token: Callable[[str | None], bool],
                 reports: Callable[[list], list], host: str = "127.0.0.1", port: int = 0, local: bool = True,
                 rings=None, native: bool | None = None):
        self._handle = handle
        self._check_token = check_token
        self._rings = rings
        self._count_reports = reports
        self._reports: list[tuple[_Connection, tuple]] = []
        """The packed reports read in this turn of the loop, not yet counted."""
        host = host.strip("[]")  # an IPv6 host as gRPC spells it
        self._listener = socket.create_server((host, port), family=_family(host), backlog=1024)
        self.port: int = self._listener.getsockname()[1]
        self._listeners = [self._listener]
        self.local_name: str | None = None
        """The abstract Unix socket's name (without its leading NUL), or None where there is none."""
        if local and LOCAL_SOCKETS:
            name = f"elastimator-report-line-{secrets.token_hex(8)}"
            local_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                local_listener.bind("\0" + name)
                local_listener.listen(1024)
                self._listeners.append(local_listener)
                self.local_name = name
            except OSError as e:  # a sandbox that forbids them: every worker takes TCP
                local_listener.close()
                logger.info("The report line takes TCP only: no Unix socket (%s).", e)
        self._selector = selectors.DefaultSelector()
        native = NATIVE if native is None else native
        self._native = _line_native if native and isinstance(self._selector, getattr(selectors, "EpollSelector", ())) \
            else None
        self._marked: list[str | None] = []
        """By file descriptor: the worker of each connection the native loop reads itself (`_mark`), else None."""
        self._registered = self._selector.get_map()
        """By file descriptor, what the loop watches (a live view): the selector key of each listener, the wake
        socket and each connection, the native loop's events are looked up in."""
        self._connections: dict[socket.socket, _Connection] = {}
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._next_hello_check = 0.0
        self.room = max(1, (open_files.raise_limit(2 * MAX_CONNECTIONS + RESERVED_FILES) - RESERVED_FILES) // 2)
        """The most connections this process's open-file limit leaves the line (MAX_CONNECTIONS caps it too)."""
        self._paused: list[socket.socket] = []
        """Listeners not polled until `_resume_at`: the process ran out of open files."""
        self._resume_at = 0.0
        self._warned_at = -WARN_EVERY_SECS
        self._unwarned = 0
        """Warnings `_warn` held back since the last one it logged."""
        self.answered = 0
        """Calls answered so far (refusals included)."""

    @property
    def native(self) -> bool:
        """Whether the loop's wait, lone reports' reads and their replies run in C (`_line_native`)."""
        return self._native is not None

    def start(self) -> "ReportLineServer":
        for listener in self._listeners:
            listener.setblocking(False)
            self._selector.register(listener, selectors.EVENT_READ, None)
        self._wake_reader.setblocking(False)
        self._selector.register(self._wake_reader, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._loop, name="report-line", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped = True
        try:
            self._wake_writer.send(b"x")
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        _yield_to_senders()
        try:
            while not self._stopped:
                self._turn(timeout_secs=1.0)
                if time.monotonic() >= self._next_hello_check:
                    self._drop_silent()
                    self._resume_accepting()
        finally:
            for connection in list(self._connections.values()):
                self._drop(connection, None)
            for listener in self._listeners:
                close_socket(listener)
            self._selector.close()
            self._wake_reader.close()
            self._wake_writer.close()

    def _turn(self, timeout_secs: float) -> None:
        """One turn of the loop: waits up to `timeout_secs` for what is ready, reads it, answers what came."""
        if self._native is not None:
            self._native_turn(round(timeout_secs * 1000))
        else:
            for key, events in self._selector.select(timeout=timeout_secs):
                self._on_event(key.data or key.fileobj, events)
        if self._reports:
            self._answer_reports()

    def _native_turn(self, timeout_ms: int) -> None:
        """One wait in C: the lone packed reports it read are counted and answered there, the rest is ours."""
        reports, fds, others = self._native.poll(self._selector.fileno(), timeout_ms, self._marked)
        if reports:
            self.answered += len(reports)
            replies = self._count_reports(reports)
            for index, sent in self._native.answer(fds, replies):  # those not sent whole: buffer, or drop
                connection = self._registered[fds[index]].data
                if sent < 0:
                    self._drop(connection, OSError(-sent, os.strerror(-sent)))
                else:
                    self._send_framed(connection, reply_data(replies[index])[sent:])
        for fd, mask, chunk in others:
            key = self._registered.get(fd)
            if key is None:  # closed by an event before it in this turn
                continue
            events = (selectors.EVENT_WRITE if mask & ~select.EPOLLIN else 0) | \
                     (selectors.EVENT_READ if mask & ~select.EPOLLOUT else 0)  # as selectors reads epoll's
            self._on_event(key.data or key.fileobj, events & key.events, chunk)

    def _on_event(self, target, events: int, chunk: bytes | None = None) -> None:
        """What a turn of the loop does with one ready object (`chunk`: what the native loop read from it)."""
        if isinstance(target, _Connection):
            if events & selectors.EVENT_WRITE:
                self._flush(target)
            else:
                self._read(target, chunk)
        elif target is not self._wake_reader:
            self._accept(target)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):  # the connection waits; polling again now would spin
                    self._pause_accepting(listener, e)
                else:
                    logger.warning("The report line could not accept a connection: %s", e)
                return
            most = min(MAX_CONNECTIONS, self.room)
            if len(self._connections) >= most:
                self._warn(f"The report line has {len(self._connections)} connections open, the most "
                           f"{'it takes' if most == MAX_CONNECTIONS else 'the open-file limit leaves it'}; "
                           "closing connections past that (those workers report over gRPC)"
                           + ("" if most == MAX_CONNECTIONS else ". Raise the limit (ulimit -n) to serve more"))
                close_socket(sock)
                continue
            tune(sock)
            sock.setblocking(False)
            connection = _Connection(sock, time.monotonic() + HELLO_TIMEOUT_SECS)
            self._connections[sock] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)

    def _read(self, connection: "_Connection", chunk: bytes | None = None) -> None:
        """Reads what arrived (`chunk`, where the native loop read it already) and answers its frames."""
        try:
            if chunk is None:
                chunk = connection.sock.recv(1 << 16)
            if not chunk:
                raise FrameError("the connection closed")
            if connection.packed and chunk[LENGTH.size:LENGTH.size + 1] == b"R" and connection.received.whole(chunk):
                # The usual chunk: one packed report (a third less of the line's Python than the general path).
                self._reports.append((connection, unpack_report(chunk[LENGTH.size:], connection.worker)))
                return
            for body in connection.received.bodies(chunk):
                self._frame(connection, body)
                if connection.closing or connection.sock not in self._connections:
                    break
        except (FrameError, OSError) as e:  # a worker that ended or died, or a peer that is not one
            self._drop(connection, e)
            return
        if connection.closing and not connection.unsent:
            self._drop(connection, None)
        else:
            self._mark(connection)

    def _mark(self, connection: "_Connection") -> None:
        """Lets the native loop read `connection` itself while all it can receive next is a lone packed report
        answered at once: past a packed hello, no part of a frame held, no reply waiting, not closing."""
        if self._native is None:
            return
        fd = connection.fd
        if fd >= len(self._marked):
            self._marked.extend([None] * (fd + 1 - len(self._marked)))
        readable = connection.packed and connection.received.empty and not connection.unsent \
            and not connection.closing and connection.sock in self._connections
        self._marked[fd] = connection.worker if readable else None

    def _frame(self, connection: "_Connection", body: bytes) -> None:
        """Answers one frame: the hello first, then calls."""
        if connection.worker is None:
            self._hello(connection, json_object(body))
        elif connection.packed and body[:1] == b"R":
            self._reports.append((connection, unpack_report(body, connection.worker)))
        else:
            if self._reports:  # what this connection (or another) reported before this call counts first
                self._answer_reports()
            self._send(connection, json.dumps(self._answer(json_object(body))).encode("utf-8"))

    def _answer_reports(self) -> None:
        """Counts the packed reports read so far, and answers each on its line."""
        reports, self._reports = self._reports, []
        self.answered += len(reports)
        for (connection, _), reply in zip(reports, self._count_reports([fields for _, fields in reports])):
            if connection.sock in self._connections:  # (one whose later frame was garbage is gone)
                self._send_framed(connection, reply_data(reply))

    def _hello(self, connection: "_Connection", hello: dict) -> None:
        token = hello.get("token")
        if not isinstance(token, str) or not self._check_token(token):
            self._send(connection, json.dumps({"error": f"UNAUTHENTICATED: {TOKEN_REFUSED}"}).encode("utf-8"))
            connection.closing = True
            return
        # A packed report is the hello's worker's: a line whose hello named none reports in JSON.
        worker = hello.get("worker")
        connection.packed = isinstance(worker, str) and bool(worker)
        connection.worker = worker if connection.packed else ""
        connection.peer = worker or _peer(connection.sock)
        if connection.packed and "ring" in hello and connection.sock.family == socket.AF_UNIX \
                and self._rings is not None:
            connection.ring = RingReader.open(hello["ring"])
            if connection.ring is not None:
                self._rings.attach_ring(worker, connection.ring)
        self._send(connection, json.dumps(
            {"methods": list(LINE_METHODS), "packed": list(PACKED_METHODS if connection.packed else ()),
             **({"ring": connection.ring is not None} if "ring" in hello else {})}).encode("utf-8"))

    def _send(self, connection: "_Connection", body: bytes) -> None:
        self._send_framed(connection, frame(body))

    def _send_framed(self, connection: "_Connection", data: bytes) -> None:
        if not connection.unsent:  # nothing is waiting: send now
            try:
                sent = connection.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as e:
                self._drop(connection, e)
                return
            if sent == len(data) and not connection.closing:
                return
            data = data[sent:]
        connection.unsent += data
        self._flush(connection)

    def _flush(self, connection: "_Connection") -> None:
        """Sends what the connection's peer has not been sent; waits for the socket to take the rest."""
        try:
            sent = connection.sock.send(connection.unsent)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as e:
            self._drop(connection, e)
            return
        del connection.unsent[:sent]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if connection.unsent else 0)
        if events != connection.events:
            connection.events = events
            self._selector.modify(connection.sock, events, connection)
        if connection.closing and not connection.unsent:
            self._drop(connection, None)
        else:
            self._mark(connection)

    def _pause_accepting(self, listener: socket.socket, error: OSError) -> None:
        self._selector.unregister(listener)
        self._paused.append(listener)
        self._resume_at = time.monotonic() + PAUSE_SECS
        self._warn(f"The report line ran out of open files with {len(self._connections)} connections open "
                   f"({error.strerror}); it stops accepting for {PAUSE_SECS:g}s at a time. Raise the open-file "
                   "limit (ulimit -n) of the process that serves the shard service")

    def _resume_accepting(self) -> None:
        if self._paused and time.monotonic() >= self._resume_at:
            for listener in self._paused:
                self._selector.register(listener, selectors.EVENT_READ, None)
            self._paused = []

    def _warn(self, message: str) -> None:
        """Logs `message` at most every WARN_EVERY_SECS, with how many times it was held back meanwhile."""
        now = time.monotonic()
        if now - self._warned_at < WARN_EVERY_SECS:
            self._unwarned += 1
            return
        held_back = f" ({self._unwarned} warning(s) held back since the last)" if self._unwarned else ""
        logger.warning("%s%s.", message, held_back)
        self._warned_at, self._unwarned = now, 0

    def _drop_silent(self) -> None:
        """Closes connections that sent no hello within HELLO_TIMEOUT_SECS (looked for once a second)."""
        now = time.monotonic()
        self._next_hello_check = now + 1.0
        for connection in [c for c in self._connections.values() if c.worker is None and c.hello_by < now]:
            self._drop(connection, FrameError(f"no hello within {HELLO_TIMEOUT_SECS:.0f}s"))

    def _drop(self, connection: "_Connection", error: Exception | None) -> None:
        if self._connections.pop(connection.sock, None) is None:
            return
        self._mark(connection)
        if error is not None and not self._stopped:
            logger.debug("Report line from %s ended: %s", connection.peer or _peer(connection.sock), error)
        try:
            self._selector.unregister(connection.sock)
        except (KeyError, ValueError):
            pass
        close_socket(connection.sock)
        if connection.ring is not None:
            self._rings.detach_ring(connection.worker, connection.ring)  # what it holds is counted as it closes

    def _answer(self, request: dict) -> dict:
        self.answered += 1
        method = request.pop("method", None)
        if method not in LINE_METHODS:
            return {"error": f"INVALID_ARGUMENT: the report line takes {' and '.join(map(repr, LINE_METHODS))} "
                             f"calls only; got {method!r}. Other calls go over gRPC."}
        try:
            return self._handle(method, request)
        except ShardServiceError as e:
            return {"error": f"{e.status}: {e}", "status": e.status}


class _Connection:
    """One report line's state in the server's loop."""

    __slots__ = ("sock", "fd", "hello_by", "received", "unsent", "events", "worker", "packed", "peer", "ring",
                 "closing")

    def __init__(self, sock: socket.socket, hello_by: float):
        self.sock = sock
        self.fd = sock.fileno()
        """Kept: a closed socket's fileno() is -1."""
        self.hello_by = hello_by
        self.received = FrameBuffer()
        self.unsent = bytearray()
        self.events = selectors.EVENT_READ
        self.worker: str | None = None
        """The hello's worker ("" for a hello that named none); None before the hello."""
        self.packed = False
        self.peer: str | None = None
        self.ring: RingReader | None = None
        self.closing = False
        """Close once what is unsent has gone (a refused hello)."""


def _yield_to_senders() -> None:
    """Makes the calling thread SCHED_BATCH where the platform has it: what it is woken for waits for the next
    scheduling point instead of preempting the thread that woke it (see the module doc)."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or a policy this process may not take
        pass


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _peer(connection: socket.socket) -> str:
    try:
        name = connection.getpeername()
        return "%s:%s" % name[:2] if isinstance(name, tuple) else "a process on this machine"
    except OSError:
        return "a closed connection"
