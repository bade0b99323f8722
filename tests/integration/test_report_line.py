"""The report line over real loopback sockets: reports and shard requests travel it, anything else is refused,
and a call it could not deliver goes over gRPC and still counts once."""

import itertools
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from elastimator.elastic.client import ShardClient
from elastimator.elastic import report_line_client, report_line_codec as codec, report_line_server
from elastimator.elastic.report_line_client import ReportLine
from elastimator.elastic.report_line_codec import MAX_FRAME_BYTES
from elastimator.elastic.report_ring import ReportRing
from elastimator.elastic.service import ShardServer, ShardService
from elastimator.elastic.shards import LeaseTakenBackError, ShardServiceError

pytestmark = pytest.mark.integration
TOKEN = "job-token-123"


@pytest.fixture(params=["native", "python"])
def server(request, monkeypatch):
    """A service whose report line runs its native loop, or its Python one."""
    if request.param == "native" and report_line_server._line_native is None:
        pytest.skip("the native report line was not built here (no C compiler, or not Linux)")
    monkeypatch.setattr(report_line_server, "NATIVE", request.param == "native")
    server = ShardServer(ShardService(TOKEN)).start()
    assert server.report_line.native == (request.param == "native")
    server.service.handle("add_dataset", {"dataset": {"name": "train", "size": 100, "shard_size": 10}})
    yield server
    server.stop()


def _line_to(server, hello: dict | None = None) -> tuple[socket.socket, object]:
    sock = socket.create_connection(("127.0.0.1", server.report_line.port), timeout=5)
    if hello is not None:
        _send(sock, hello)
    return sock, sock.makefile("rb")


def _send(sock, message) -> None:
    body = json.dumps(message).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)


def _read(stream) -> dict | None:
    body = _read_body(stream)
    return None if body is None else json.loads(body)


def _read_body(stream) -> bytes | None:
    """A frame's body, JSON or packed; None once the connection closed."""
    head = stream.read(4)
    if len(head) < 4:
        return None
    return stream.read(struct.unpack(">I", head)[0])


def _pass(stream, sock, seen: list | None = None) -> bool:
    """Passes one frame on as it came (and adds it to `seen`); False once the connection closed."""
    body = _read_body(stream)
    if body is not None:
        sock.sendall(struct.pack(">I", len(body)) + body)
        if seen is not None:
            seen.append(body)
    return body is not None


def test_reports_and_requests_travel_the_line_and_count(server):
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    for offset in range(shard.start, shard.end, 2):
        client.report("train", shard.shard_id, 2, lease=shard.lease, offset=offset)
    assert client.request("train").shard_id != shard.shard_id
    assert client.reports_over_line == 5 and server.report_line.answered == 5 + 2
    assert client.status("train")["trained_records"] == 10
    assert client.lease_floor is not None  # the line's replies carry the floor as gRPC's do


def test_a_report_counts_when_sent_and_its_reply_is_read_later_between_other_calls(server):
    """The next step sends a report as it starts and reads the reply before it writes; calls over gRPC (a
    heartbeat, the input's next request) may come in between."""
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    counted = client.start_report("train", shard.shard_id, 4, lease=shard.lease, offset=shard.start)
    client.heartbeat()
    counted()
    assert client.status("train")["trained_records"] == 4
    client.report("train", shard.shard_id, 4, lease=shard.lease, offset=shard.start + 4)
    assert client.reports_over_line == 2 and server.report_line.answered == 2 + 1  # and the request
    assert client.status("train")["trained_records"] == 8


def test_the_line_refuses_a_wrong_token_other_calls_and_garbage(server):
    sock, stream = _line_to(server, {"token": "wrong", "worker": "w0"})
    assert "UNAUTHENTICATED" in _read(stream)["error"]
    assert _read(stream) is None  # and closes

    sock, stream = _line_to(server, {"token": TOKEN, "worker": "w0"})
    assert _read(stream) == {"methods": ["report", "request"], "packed": ["report"]}
    _send(sock, {"method": "fail_worker", "failed_worker": "w1"})
    assert "takes 'report' and 'request' calls only" in _read(stream)["error"]
    _send(sock, {"method": "report", "dataset": "train", "worker": "w0", "shard_id": 0, "consumed": 1,
                 "offset": 0})
    reply = _read(stream)  # w0 holds no shard: the book's own refusal, with its status for the client
    assert reply["status"] == "ABORTED" and reply["error"].startswith("ABORTED: worker 'w0' reported shard 0")
    _send(sock, {"method": "report", "dataset": "eval", "worker": "w0", "shard_id": 0, "consumed": 1, "offset": 0})
    assert _read(stream)["error"].startswith("NOT_FOUND: unknown data set 'eval'")  # as gRPC answers it
    sock.sendall(struct.pack(">I", MAX_FRAME_BYTES + 1))
    assert _read(stream) is None  # not a frame of ours: closed

    sock, stream = _line_to(server, {"token": TOKEN})
    assert "methods" in _read(stream)
    sock.sendall(struct.pack(">I", 3) + b"[1]")
    assert _read(stream) is None

    client = ShardClient(server.address, TOKEN, worker="w0")  # the server still serves everyone else
    shard = client.request("train")
    client.report("train", shard.shard_id, 1, lease=shard.lease, offset=shard.start)
    assert client.status("train")["trained_records"] == 1


def _lossy_proxy(server, passes: list[int | None], sent: list | None = None) -> list[int]:
    """A proxy in front of the line. Its i-th connection passes the hello and `passes[i]` calls each way, then
    passes one call more and cuts the connection instead of passing the service's reply back: the call reached
    the book, and the worker cannot know it. None passes everything. Returns the cuts as they happen; the frames
    the worker sent, as they came, go to `sent`."""
    listener = socket.create_server(("127.0.0.1", 0))
    target = server.report_line.port
    server.report_line.port = listener.getsockname()[1]  # what the service announces: the proxy ...
    server.report_line.local_name = None  # ... and no Unix socket, which would pass it by
    cuts = []

    def proxy():
        for passed in passes:
            try:
                worker_side, _ = listener.accept()
            except OSError:
                return
            service_side = socket.create_connection(("127.0.0.1", target))
            worker_in, service_in = worker_side.makefile("rb"), service_side.makefile("rb")
            for _ in range(1 + passed) if passed is not None else itertools.count():  # the hello, the calls passed
                if not _pass(worker_in, service_side, sent):
                    break
                _pass(service_in, worker_side)
            if passed is None:
                continue
            _pass(worker_in, service_side)  # this call reaches the book ...
            _read_body(service_in)  # ... and its reply is lost
            cuts.append(1)
            for side in (worker_side, service_side):
                side.shutdown(socket.SHUT_RDWR)  # the file objects would keep a bare close() from closing
                side.close()
        listener.close()

    threading.Thread(target=proxy, daemon=True).start()
    return cuts


def test_a_report_whose_reply_the_line_lost_is_sent_over_grpc_and_counts_once(server):
    cuts = _lossy_proxy(server, passes=[1, 0])
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")  # passed
    client.report("train", shard.shard_id, 3, lease=shard.lease, offset=shard.start)
    assert cuts == [1] and client.status("train")["trained_records"] == 3  # once, not twice
    client.report("train", shard.shard_id, 3, lease=shard.lease, offset=shard.start + 3)  # a new line
    assert cuts == [1, 1] and client.status("train")["trained_records"] == 6


def test_a_request_whose_reply_the_line_lost_gets_the_same_shard_over_grpc(server):
    cuts = _lossy_proxy(server, passes=[0, None])
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    assert cuts == [1] and client.status("train")["doing_shards"] == 1  # not a second shard, out for no one
    client.report("train", shard.shard_id, 10, lease=shard.lease, offset=shard.start)  # it is this worker's
    assert client.status("train")["done_shards"] == 1 and client.reports_over_line == 1


def test_reports_travel_packed_where_the_service_offers_it_and_as_json_where_it_does_not(server, monkeypatch):
    sent, line_port = [], server.report_line.port
    _lossy_proxy(server, passes=[None], sent=sent)
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)
    assert [body[:1] for body in sent] == [b"{", b"{", b"R"]  # the hello, the request, the report
    assert client.status("train")["trained_records"] == 2 and client.lease_floor is not None

    monkeypatch.setattr(report_line_server, "PACKED_METHODS", ())  # an older service: JSON only
    server.report_line.port, sent[:] = line_port, []
    _lossy_proxy(server, passes=[None], sent=sent)
    older = ShardClient(server.address, TOKEN, worker="w1")
    other = older.request("train")
    older.report("train", other.shard_id, 3, lease=other.lease, offset=other.start)
    assert [body[:1] for body in sent] == [b"{", b"{", b"{"] and older.reports_over_line == 1
    assert older.status("train")["trained_records"] == 5


def test_a_packed_report_counts_and_its_reply_is_packed_and_garbage_closes_the_line(server):
    shard = server.service.handle("request", {"dataset": "train", "worker": "w0"})
    sock, stream = _line_to(server, {"token": TOKEN, "worker": "w0"})
    assert _read(stream)["packed"] == ["report"]
    report = {"dataset": "train", "shard_id": shard["shard_id"], "consumed": 4, "lease": shard["lease"],
              "offset": shard["start"]}
    sock.sendall(struct.pack(">I", len(body := codec.pack_report(report))) + body)
    reply = _read_body(stream)
    assert reply[:1] == b"A" and codec.unpack_reply(reply) == {"lease_floor": shard["lease_floor"]}
    sock.sendall(struct.pack(">I", len(body)) + body)  # the same report again: counted once
    assert codec.unpack_reply(_read_body(stream)) == {"lease_floor": shard["lease_floor"]}
    assert server.service.handle("status", {"dataset": "train"})["trained_records"] == 4
    garbled = body[:codec.PACKED_REPORT.size] + b"\xff\xfe"  # a data set name that is not UTF-8
    sock.sendall(struct.pack(">I", len(garbled)) + garbled)
    assert _read_body(stream) is None

    sock, stream = _line_to(server, {"token": TOKEN, "worker": "w0"})
    _read(stream)
    report["offset"] += 1  # skips a record: the book refuses it, in JSON
    sock.sendall(struct.pack(">I", len(body := codec.pack_report(report))) + body)
    assert "FAILED_PRECONDITION" in _read(stream)["error"]
    sock.sendall(struct.pack(">I", 5) + b"R1234")  # too short for a report
    assert _read_body(stream) is None

    sock, stream = _line_to(server, {"token": TOKEN})  # a hello without a worker: no packed reports
    assert _read(stream)["packed"] == []
    sock.sendall(struct.pack(">I", len(body)) + body)
    assert _read_body(stream) is None  # not JSON: closed


def test_an_older_service_whose_line_takes_reports_only_gets_requests_over_grpc(server, monkeypatch):
    monkeypatch.setattr(report_line_server, "LINE_METHODS", ("report",))  # what the service announces, and takes
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)
    assert client.reports_over_line == server.report_line.answered == 1


def test_reports_go_over_grpc_where_the_line_is_off_or_out_of_reach(server):
    without = ShardServer(ShardService(TOKEN), report_port=None).start()
    try:
        assert without.report_line is None
        without.service.handle("add_dataset", {"dataset": {"name": "train", "size": 10, "shard_size": 10}})
        client = ShardClient(without.address, TOKEN, worker="w0")
        shard = client.request("train")
        client.report("train", shard.shard_id, 4, lease=shard.lease, offset=shard.start)
        assert client.status("train")["trained_records"] == 4 and client.reports_over_line == 0
    finally:
        without.stop()

    server.report_line.stop()  # announced, but nothing listens there
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    client.report("train", shard.shard_id, 4, lease=shard.lease, offset=shard.start)
    assert client.status("train")["trained_records"] == 4
    with pytest.raises(LeaseTakenBackError, match="ABORTED: worker 'w9' reported shard"):
        ShardClient(server.address, TOKEN, worker="w9").report("train", shard.shard_id, 1, offset=shard.start)


def test_connections_past_the_limit_are_closed_and_their_reports_go_over_grpc(server, monkeypatch):
    monkeypatch.setattr(report_line_server, "MAX_CONNECTIONS", 2)
    # Authenticated lines hold their slots for as long as they are open (a line without a hello would lose its
    # slot after HELLO_TIMEOUT_SECS, which a slow machine could reach before the client below connects).
    held = [_line_to(server, {"token": TOKEN, "worker": f"held{i}"}) for i in range(2)]
    assert all("methods" in _read(stream) for _, stream in held)
    _, stream = _line_to(server)
    assert _read(stream) is None  # closed at once
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)
    assert client.status("train")["trained_records"] == 2 and client.reports_over_line == 0
    for sock, _ in held:
        sock.close()



@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="open-file limits as Linux sets them")
def test_a_low_open_file_limit_closes_lines_past_its_room_and_running_out_pauses_accepting():
    """A process whose hard limit is 320 open files (few_open_files.py, in a process of its own): the line takes
    the half of what is left past RESERVED_FILES and closes the rest, warning once with what to raise; having run
    out of files while a worker connects, it stops accepting for a moment (one warning, not a retry loop) and
    takes the worker once files are free."""
    child = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "few_open_files.py")],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    seen = json.loads(child.stdout.strip().splitlines()[-1])
    assert seen["room"] == (320 - report_line_server.RESERVED_FILES) // 2 == 32
    assert (seen["answered"], seen["closed"]) == (32, 8)
    assert len(seen["closed_warnings"]) == 1 and "Raise the limit (ulimit -n)" in seen["closed_warnings"][0]
    assert not seen["answered_while_out"]
    assert len(seen["ran_out_warnings"]) == 1 and "ran out of open files" in seen["ran_out_warnings"][0]
    assert seen["late"]["methods"] == ["report", "request"]

@pytest.mark.skipif(not codec.LOCAL_SOCKETS, reason="abstract Unix sockets are Linux's")
def test_a_worker_on_the_services_machine_takes_the_line_over_its_unix_socket(server):
    client = ShardClient(server.address, TOKEN, worker="w0")
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)
    assert client.status("train")["trained_records"] == 2 and client.reports_over_line == 1
    local = ReportLine("127.0.0.1", server.report_line.port, TOKEN, "w1", local_name=server.report_line.local_name)
    assert local.local and "report" in local.methods
    local.close()
    # A name this process cannot reach (the service in another network namespace, or on another machine): TCP.
    elsewhere = ReportLine("127.0.0.1", server.report_line.port, TOKEN, "w1", local_name="not-in-this-namespace")
    assert not elsewhere.local and "report" in elsewhere.methods
    elsewhere.close()
    with pytest.raises(ShardServiceError, match="UNAUTHENTICATED"):  # the token is checked there too
        ReportLine("127.0.0.1", server.report_line.port, "wrong", "w1", local_name=server.report_line.local_name)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def _policy(tid: int) -> int | None:
    """A thread's scheduling policy; None when it ended (an earlier test's line, closing) since it was listed."""
    try:
        return os.sched_getscheduler(tid)
    except ProcessLookupError:
        return None


def test_the_threads_serving_the_line_do_not_preempt_the_workers_that_wake_them(server):
    line = ReportLine("127.0.0.1", server.report_line.port, TOKEN, "w0")
    assert "report" in line.methods  # answered by its serving thread, which now exists
    serving = [t.native_id for t in threading.enumerate() if t.name == "report-line"]
    alive = [policy for policy in map(_policy, serving) if policy is not None]  # this line's thread among them
    assert alive and all(policy == os.SCHED_BATCH for policy in alive)
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the rest of the service's process is as it was
    line.close()


def test_the_report_line_listens_on_loopback_and_a_taken_port_is_a_clear_error(server):
    assert server.report_line._listener.getsockname()[0] == "127.0.0.1"  # pylint: disable=protected-access
    with pytest.raises(ShardServiceError, match=f"report line could not listen on 127.0.0.1:{server.report_line.port}"
                                                ".*Choose another report port"):
        ShardServer(ShardService(TOKEN), report_port=server.report_line.port).start()


def test_a_report_in_the_ring_counts_with_no_frame_sent(server):
    client = ShardClient(server.address, TOKEN, worker="w0")
    ring = client.report_ring
    shard = client.request("train")
    answered = server.report_line.answered
    counted = client.start_report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)
    counted()  # what a step's gate calls where the ring's words send it to Python: no seal, nothing to wait for
    assert server.report_line.answered == answered  # the report went into the ring, not over the line
    assert client.status("train")["trained_records"] == 2 and client.reports_over_line == 1
    assert ring is client.report_ring and not ring.closed
    client.close()


def test_the_rings_reports_reach_the_book_with_no_call_made(server):
    client = ShardClient(server.address, TOKEN, worker="w0")
    client.report_ring  # pylint: disable=pointless-statement  (opens the line with the ring)
    shard = client.request("train")
    client.report("train", shard.shard_id, 3, lease=shard.lease, offset=shard.start)
    deadline = time.monotonic() + 10
    while server.service.book.status("train")["trained_records"] != 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the server reads the rings a few times a second
    assert server.service.book.status("train")["trained_records"] == 3
    client.close()


def test_a_seal_counts_what_the_ring_holds_and_holds_the_rest_until_the_commit(server):
    chief = ShardClient.in_process(server.service, "chief-0")
    client = ShardClient(server.address, TOKEN, worker="w0")
    ring = client.report_ring
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)  # before the seal
    seal = chief.seal(checkpoint_step=1)
    assert ring.sealing and chief.status("train")["trained_records"] == 2  # in the seal
    counted = client.start_report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start + 2)
    waiting = threading.Thread(target=counted)
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and chief.status("train")["trained_records"] == 2  # the writes would wait here
    chief.commit(seal, checkpoint_step=1)
    waiting.join(10)
    assert not waiting.is_alive() and not ring.sealing and chief.status("train")["trained_records"] == 4
    client.close()


def test_a_report_the_book_refuses_in_the_ring_is_dropped_and_the_worker_hears_its_floor(server):
    client = ShardClient(server.address, TOKEN, worker="w0")
    client.report_ring  # pylint: disable=pointless-statement
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease + 1, offset=shard.start)  # not its lease
    assert client.status("train")["trained_records"] == 0
    client.call("fail_worker", failed_worker="w0")  # given up on: every lease it held is below its floor now
    client.heartbeat()
    assert not client.lease_floor <= shard.lease
    client.close()


def test_only_a_worker_on_the_services_unix_socket_hands_over_its_ring(server):
    ring = ReportRing.create()
    local = ReportLine("127.0.0.1", server.report_line.port, TOKEN, "w1", local_name=server.report_line.local_name,
                       ring=ring)
    assert local.took_ring
    local.close()
    ring.close()
    ring = ReportRing.create()
    over_tcp = ReportLine("127.0.0.1", server.report_line.port, TOKEN, "w1", local_name="not-in-this-namespace",
                          ring=ring)
    assert not over_tcp.took_ring
    over_tcp.close()
    ring.close()


def test_what_a_killed_worker_wrote_to_its_ring_is_counted_and_no_name_is_left(server):
    shard = server.service.handle("request", {"dataset": "train", "worker": "w1"})
    worker = subprocess.run([sys.executable, "-c", f"""
import os
from elastimator.elastic.report_ring import ReportRing
from elastimator.elastic.report_line_client import ReportLine
ring = ReportRing.create()
line = ReportLine("127.0.0.1", {server.report_line.port}, {TOKEN!r}, "w1", local_name={server.report_line.local_name!r},
                  ring=ring)
ring.put("train", {shard["shard_id"]}, {shard["lease"]}, {shard["start"]}, 4)
print(ring.path, line.took_ring, os.path.exists(ring.path), flush=True)
os.kill(os.getpid(), 9)
"""], capture_output=True, text=True, timeout=120)
    path, took, exists = worker.stdout.split()
    assert worker.returncode == -9 and took == "True" and exists == "False" and not os.path.exists(path)
    deadline = time.monotonic() + 10
    while server.service.handle("status", {"dataset": "train"})["trained_records"] != 4:
        assert time.monotonic() < deadline, "the killed worker's report was never counted"
        time.sleep(0.01)


def test_a_worker_over_tcp_or_grpc_has_no_ring_and_its_reports_are_answered(server, monkeypatch):
    monkeypatch.setattr(report_line_client, "_connect_local", lambda name, timeout: None)  # another machine
    over_tcp = ShardClient(server.address, TOKEN, worker="w0")
    assert over_tcp.report_ring is None
    shard = over_tcp.request("train")
    over_tcp.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)
    assert over_tcp.reports_over_line == 1 and over_tcp.status("train")["trained_records"] == 2
    assert ShardClient(server.address, TOKEN, worker="w1", report_line=False).report_ring is None


def test_the_chiefs_reports_go_into_its_ring_and_count_by_the_next_call(server):
    chief = ShardClient.in_process(server.service, "chief-0")
    assert chief.report_ring is not None
    shard = chief.request("train")
    chief.start_report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)()
    assert chief.status("train")["trained_records"] == 2
    chief.close()


def test_after_the_line_breaks_reports_are_answered_and_each_counts_once(server):
    client = ShardClient(server.address, TOKEN, worker="w0")
    ring = client.report_ring
    shard = client.request("train")
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start)  # into the ring
    client._transport._line._sock.shutdown(socket.SHUT_RDWR)  # pylint: disable=protected-access  (a cut)
    counted = client.start_report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start + 2)
    counted()
    client.report("train", shard.shard_id, 2, lease=shard.lease, offset=shard.start + 4)
    assert client.status("train")["trained_records"] == 6 and ring is client.report_ring
    client.close()


def _packed_line(server, worker: str, receive_buffer: int | None = None):
    """A line past its hello (its socket receiving into `receive_buffer` bytes where given), and a packed report
    of the next 2 records of a shard `worker` holds (framed)."""
    shard = server.service.handle("request", {"dataset": "train", "worker": worker})
    sock = socket.socket()
    sock.settimeout(5)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", server.report_line.port))
    stream = sock.makefile("rb")
    _send(sock, {"token": TOKEN, "worker": worker})
    assert _read(stream)["packed"] == ["report"]
    body = codec.pack_report({"dataset": "train", "shard_id": shard["shard_id"], "consumed": 2,
                                    "lease": shard["lease"], "offset": shard["start"]})
    return sock, stream, shard, codec.frame(body)


def test_reports_split_across_sends_or_sent_together_are_each_counted_once_and_answered_in_order(server):
    """A lone report in a chunk is the fast case (the native loop's); a frame in pieces, or several frames in
    one chunk, are read by the Python loop, after which the line's next lone report is the fast case again."""
    sock, stream, shard, report = _packed_line(server, "w0")
    sock.sendall(report[:7])  # a report in three pieces
    time.sleep(0.05)
    sock.sendall(report[7:20])
    time.sleep(0.05)
    sock.sendall(report[20:])
    assert codec.unpack_reply(_read_body(stream)) == {"lease_floor": shard["lease_floor"]}
    request = json.dumps({"method": "request", "dataset": "train", "worker": "w0"}).encode()
    sock.sendall(report * 3 + struct.pack(">I", len(request)) + request + report[:10])  # three, a call, a piece
    replies = [_read_body(stream) for _ in range(4)]
    assert [reply[:1] for reply in replies] == [b"A", b"A", b"A", b"{"]
    assert json.loads(replies[3])["shard_id"] != shard["shard_id"]  # the call's own reply: w0's next shard
    sock.sendall(report[10:])
    assert codec.unpack_reply(_read_body(stream)) == {"lease_floor": shard["lease_floor"]}
    sock.sendall(report)  # a lone report again
    assert codec.unpack_reply(_read_body(stream)) == {"lease_floor": shard["lease_floor"]}
    assert server.service.handle("status", {"dataset": "train"})["trained_records"] == 2
    assert server.report_line.answered == 1 + 3 + 1 + 1 + 1


def test_replies_a_worker_does_not_read_wait_for_it_in_order_and_other_lines_go_on(server):
    """A worker that sends and does not read fills its connection: the replies the socket cannot take wait in
    the line's buffer, and are sent, all of them in order, once the worker reads."""
    sock, stream, shard, report = _packed_line(server, "w0", receive_buffer=4096)
    for connection in list(server.report_line._connections.values()):  # pylint: disable=protected-access
        connection.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # (the service's end fills soon)
    reports = 1000  # 14 kB of replies: more than the two sockets' buffers hold

    def send_one_by_one():  # (most arrive alone, as a stepping worker's do)
        for _ in range(reports):
            sock.sendall(report)
            time.sleep(0.0002)

    sender = threading.Thread(target=send_one_by_one)
    sender.start()
    other, other_stream, other_shard, other_report = _packed_line(server, "w1")
    deadline = time.monotonic() + 30
    while sender.is_alive() and time.monotonic() < deadline:
        other.sendall(other_report)  # another worker is answered meanwhile
        assert codec.unpack_reply(_read_body(other_stream)) == {"lease_floor": other_shard["lease_floor"]}
    replies = [_read_body(stream) for _ in range(reports)]
    sender.join(timeout=30)
    assert set(replies) == {codec.PACKED_REPLY.pack(b"A", False, shard["lease_floor"])}
    assert server.service.handle("status", {"dataset": "train"})["trained_records"] == 4
