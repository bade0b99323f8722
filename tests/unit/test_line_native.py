"""The report line's native wait, read and answer (`_line_native`), against the Python functions they stand in
for: a lone packed report comes out as `unpack_report` makes it, a reply goes out as `framed_reply` packs it,
and everything else comes back to Python as it was."""

import errno
import select
import socket

import pytest

from elastimator.elastic import report_line_server
from elastimator.elastic.report_line_codec import frame, framed_reply, pack_report, unpack_report
from elastimator.elastic.shards import ShardServiceError

native = report_line_server._line_native  # pylint: disable=protected-access
pytestmark = pytest.mark.skipif(native is None, reason="the native report line was not built (no C compiler, "
                                                       "or not Linux)")
REPORT = {"dataset": "clicks-été", "shard_id": 7, "consumed": 512, "lease": 2**40 + 3, "offset": 10_240}


@pytest.fixture
def line():
    """An epoll instance watching the service's end of a socket pair; the worker's end; the marks by fd."""
    service_end, worker_end = socket.socketpair()
    poller = select.epoll()
    poller.register(service_end.fileno(), select.EPOLLIN)
    marks = [None] * (service_end.fileno() + 1)
    marks[service_end.fileno()] = "worker-3"
    yield service_end, worker_end, poller, marks
    poller.close()
    service_end.close()
    worker_end.close()


def test_a_lone_packed_report_is_read_as_unpack_report_reads_it(line):
    service_end, worker_end, poller, marks = line
    worker_end.sendall(frame(body := pack_report(REPORT)))
    reports, fds, others = native.poll(poller.fileno(), 1000, marks)
    assert reports == [unpack_report(body, "worker-3")] and fds == [service_end.fileno()] and others == []
    assert native.poll(poller.fileno(), 0, marks) == ([], [], [])  # nothing left, no wait


@pytest.mark.parametrize("sent", [
    frame(pack_report(REPORT))[:20],  # a piece of one
    frame(pack_report(REPORT)) * 2,  # two
    frame(b'{"method": "request"}'),  # another call
    frame(pack_report(REPORT)[:-2] + b"\xff\xfe"),  # a name that is not UTF-8
    frame(b"R1234"),  # too short for a report
], ids=["piece", "two", "json", "not-utf8", "short"])
def test_anything_but_a_lone_report_comes_back_with_the_bytes_read(line, sent):
    service_end, worker_end, poller, marks = line
    worker_end.sendall(sent)
    assert native.poll(poller.fileno(), 1000, marks) == ([], [], [(service_end.fileno(), select.EPOLLIN, sent)])


def test_an_unmarked_connection_and_a_closed_one_come_back_for_python_to_read(line):
    service_end, worker_end, poller, marks = line
    worker_end.sendall(frame(pack_report(REPORT)))
    unmarked = [None] * len(marks)
    assert native.poll(poller.fileno(), 1000, unmarked) == ([], [], [(service_end.fileno(), select.EPOLLIN, None)])
    assert native.poll(poller.fileno(), 1000, []) == ([], [], [(service_end.fileno(), select.EPOLLIN, None)])
    service_end.recv(1 << 16)
    worker_end.close()
    (fd, events, chunk), = native.poll(poller.fileno(), 1000, marks)[2]
    assert fd == service_end.fileno() and events & select.EPOLLIN and chunk in (b"", None)
    assert native.poll(poller.fileno(), 0, [None] * len(marks))[2][0][2] is None


def test_replies_go_out_as_framed_reply_packs_them_and_the_rest_is_handed_back(line):
    service_end, worker_end, _, _ = line
    fd = service_end.fileno()
    refusal = ShardServiceError("no shard")
    assert native.answer([fd, fd, fd], [(False, 2**40), refusal, (True, 5)]) == [(1, 0)]
    assert worker_end.recv(1 << 16) == framed_reply(False, 2**40) + framed_reply(True, 5)
    with pytest.raises(ValueError, match="as many fds as replies"):
        native.answer([fd], [])


def test_a_reply_the_socket_cannot_take_is_handed_back_unsent_and_a_broken_line_with_its_errno(line):
    service_end, worker_end, _, _ = line
    service_end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    fd = service_end.fileno()
    replies = [(False, 1)] * 10_000  # far more than the buffers hold: the worker reads none
    unsent = native.answer([fd] * len(replies), replies)
    assert unsent and all(sent == 0 for _, sent in unsent)
    received = b""
    while len(received) < (len(replies) - len(unsent)) * 14:
        received += worker_end.recv(1 << 16)
    assert received == framed_reply(False, 1) * (len(replies) - len(unsent))  # each whole, none in pieces
    worker_end.close()
    assert native.answer([fd], [(False, 1)]) in ([(0, -errno.EPIPE)], [(0, -errno.ECONNRESET)])
