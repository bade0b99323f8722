"""The report line's packed report and reply: what travels packed, what falls back to JSON, and that what comes
off the wire is what went on."""

import pytest

from elastimator.elastic import report_line_codec as codec
from elastimator.elastic.report_line_codec import FrameError, framed_reply, pack_report, unpack_reply, unpack_report


def test_a_report_and_its_reply_come_out_packed_as_they_went_in():
    report = {"dataset": "clicks-été", "shard_id": 7, "consumed": 512, "lease": 2**40 + 3, "offset": 10_240}
    body = pack_report(report)
    assert body[:1] == b"R" and len(body) == codec.PACKED_REPORT.size + len("clicks-été".encode())
    assert unpack_report(body, worker="worker-3") == ("worker-3", "clicks-été", 7, 512, 2**40 + 3, 10_240)

    assert framed_reply(False, 2**40) == codec.frame(framed_reply(False, 2**40)[4:])  # its length, then it
    assert unpack_reply(framed_reply(False, 2**40)[4:]) == {"lease_floor": 2**40}
    assert unpack_reply(framed_reply(True, 5)[4:]) == {"sealing": True, "lease_floor": 5}


@pytest.mark.parametrize("report", [
    {"dataset": "d", "shard_id": 1, "consumed": 2, "lease": None, "offset": 0},  # a report without a lease
    {"dataset": "d", "shard_id": 1, "consumed": 2.0, "lease": 3, "offset": 0},  # not an int: the book's to refuse
    {"dataset": "d", "shard_id": True, "consumed": 2, "lease": 3, "offset": 0},
    {"dataset": "d", "shard_id": 2**63, "consumed": 2, "lease": 3, "offset": 0},
    {"dataset": 4, "shard_id": 1, "consumed": 2, "lease": 3, "offset": 0},
])
def test_a_report_packing_cannot_say_goes_as_json(report):
    assert pack_report(report) is None


def test_frames_come_out_whole_however_the_connection_cut_them():
    frames = [codec.frame(body) for body in (b"R" + bytes(40), b'{"method": "request"}', b"x" * 300)]
    buffer = codec.FrameBuffer()
    assert list(buffer.bodies(frames[0])) == [b"R" + bytes(40)]  # one whole frame, as most reads are
    wire = b"".join(frames)
    cut = [wire[:3], wire[3:50], wire[50:51], wire[51:]]
    assert [body for chunk in cut for body in buffer.bodies(chunk)] == [b"R" + bytes(40), b'{"method": "request"}',
                                                                       b"x" * 300]
    oversized = codec.LENGTH.pack(codec.MAX_FRAME_BYTES + 1)
    bodies = buffer.bodies(frames[1] + oversized)
    assert next(bodies) == b'{"method": "request"}'  # the frame before the bad one is answered first
    with pytest.raises(FrameError, match="the limit is"):
        next(bodies)


def test_packed_frames_of_the_wrong_size_are_not_frames_of_ours():
    with pytest.raises(FrameError, match="packed report of 4 bytes"):
        unpack_report(b"R123", worker="w")
    with pytest.raises(FrameError, match="packed reply of 3 bytes"):
        unpack_reply(b"A12")
