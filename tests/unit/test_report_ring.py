"""The report ring: reports written by a trainer are read by the service once each, whole and in order, even after
the trainer died; a seal's mark is seen by the trainer; the step's lease check passes only a current lease; and the
service takes only a file that is really a trainer's ring."""

import os

import numpy as np
import pytest
import tensorflow as tf

from elastimator.elastic import report_ring
from elastimator.elastic.report_ring import CAPACITY, NO_FLOOR, ReportRing, RingReader, lease_check, wait_unsealed

pytestmark = pytest.mark.skipif(not os.path.isdir(report_ring.RING_DIR), reason="report rings live in /dev/shm")
RUN = 7 << 32
"""Leases and floors of one run of the service."""


@pytest.fixture
def ring():
    ring = ReportRing.create()
    yield ring
    ring.close()


class Counted(list):
    """The reports a drain counted, as (data set, shard id, lease, first record, records)."""

    def __call__(self, *report):
        self.append(report)


class Check:
    """The lease check on a batch tag, run in a session of its own."""

    def __init__(self):
        self._graph = tf.Graph()
        with self._graph.as_default():
            self._tag = tf.compat.v1.placeholder(tf.int64, [None])
            self._floor = tf.compat.v1.placeholder(tf.int64, [])
            self._refused = tf.compat.v1.placeholder(tf.int64, [None])
            self._passed = lease_check(self._tag, self._floor, self._refused)
        self._session = tf.compat.v1.Session(graph=self._graph)

    def __call__(self, leases, floor: int, refused=()) -> bool:
        tags = np.array([[3, lease, 0, 5] for lease in leases]).reshape(-1)
        return bool(self._session.run(self._passed, {self._tag: tags, self._floor: floor,
                                                     self._refused: np.array(refused, np.int64).reshape(-1)}))


def test_the_service_counts_each_report_once_in_the_order_written(ring):
    service = RingReader.open(ring.path)
    counted = Counted()
    assert service.drain(counted) == 0
    assert ring.put("train", 3, RUN + 1, 0, 512) and ring.put("train", 3, RUN + 1, 512, 512)
    assert ring.put("eval", 9, RUN + 2, 40, 7)
    assert service.drain(counted) == 3 and service.drain(counted) == 0
    assert counted == [("train", 3, RUN + 1, 0, 512), ("train", 3, RUN + 1, 512, 512), ("eval", 9, RUN + 2, 40, 7)]
    for n in range(5 * CAPACITY):  # round and round: each drained in time
        assert ring.put("train", 4, RUN + 3, n * 10, 10)
        if n % 50 == 0:
            service.drain(counted)
    service.drain(counted)
    assert [r[3] for r in counted[3:]] == [n * 10 for n in range(5 * CAPACITY)]
    service.close(counted)


def test_a_full_ring_takes_no_more_until_the_service_reads_it(ring):
    service = RingReader.open(ring.path)
    counted = Counted()
    for n in range(CAPACITY):
        assert ring.put("train", 1, RUN, n, 1)
    assert not ring.put("train", 1, RUN, CAPACITY, 1)  # this one goes answered: nothing was overwritten
    assert service.drain(counted) == CAPACITY and [r[3] for r in counted] == list(range(CAPACITY))
    assert ring.put("train", 1, RUN, CAPACITY + 1, 1)
    service.close(counted)


def test_what_a_trainer_wrote_before_it_died_is_counted_as_its_line_closes(ring):
    service = RingReader.open(ring.path)
    ring.forget_path()
    assert ring.put("train", 1, RUN, 0, 8)
    ring.close()  # the trainer is gone; the service still holds the ring
    counted = Counted()
    service.close(counted)
    assert counted == [("train", 1, RUN, 0, 8)]


def test_a_ring_the_service_closed_takes_no_report(ring):
    service = RingReader.open(ring.path)
    service.close(Counted())
    assert ring.closed and not ring.put("train", 1, RUN, 0, 8)


def test_a_half_written_entry_is_not_read(ring):
    service = RingReader.open(ring.path)
    counted = Counted()
    assert ring.put("train", 1, RUN, 0, 8)
    at = report_ring.ENTRIES + 1 * report_ring.ENTRY_WORDS * 8
    with open(f"/proc/self/fd/{ring._fd}", "r+b") as f:  # one word of the entry changed under its check
        f.seek(at + 5 * 8)
        f.write(np.int64(9).tobytes())
    assert service.drain(counted) == 0 and counted == []
    service.close(counted)


def test_the_lease_check_passes_a_current_lease_only():
    check = Check()
    assert check([RUN + 5], NO_FLOOR)  # nothing heard from the service yet
    assert check([RUN + 5], RUN + 3) and check([RUN + 3], RUN + 3)
    assert not check([RUN + 2], RUN + 3)  # below the floor: taken back
    assert not check([(8 << 32) + 5], RUN + 3)  # another run of the service
    assert not check([RUN + 5], RUN + 3, refused=[RUN + 4, RUN + 5])  # refused, above the floor
    assert check([RUN + 5], RUN + 3, refused=[RUN + 4])
    assert not check([RUN + 5, RUN + 2], RUN + 3)  # every step of a call must be current


def test_a_trainer_makes_its_ring_and_the_name_is_gone_once_the_service_has_it(ring):
    assert os.path.dirname(ring.path) == report_ring.RING_DIR and os.path.getsize(ring.path) == report_ring.SIZE
    service = RingReader.open(ring.path)
    ring.forget_path()  # as once the service has opened it
    assert not os.path.exists(ring.path)
    assert ring.put("train", 1, RUN, 0, 8)
    counted = Counted()
    service.close(counted)
    assert counted == [("train", 1, RUN, 0, 8)]
    ring.close()
    ring.close()  # again: nothing


def test_a_sealed_trainer_waits_for_the_commit_and_asks_the_service_meanwhile(ring):
    service = RingReader.open(ring.path)
    beats = []

    def heartbeat():
        beats.append(1)
        if len(beats) == 3:
            service.seal(False)  # committed

    service.seal(True)
    wait_unsealed(ring, heartbeat, heartbeat_secs=0.01)
    assert len(beats) == 3 and not ring.sealing
    service.close(Counted())


def test_the_service_takes_only_a_trainers_ring(ring, tmp_path):
    assert RingReader.open(ring.path) is not None
    elsewhere = tmp_path / os.path.basename(ring.path)
    elsewhere.write_bytes(bytes(report_ring.SIZE))
    link = os.path.join(report_ring.RING_DIR, report_ring.PREFIX + "link_test")
    os.symlink(ring.path, link)
    odd_name = os.path.join(report_ring.RING_DIR, "not-a-report-ring")
    wrong_size = os.path.join(report_ring.RING_DIR, report_ring.PREFIX + "short_test")
    with open(wrong_size, "wb") as f:
        f.write(b"12")
    try:
        for path in (str(elsewhere), link, odd_name, wrong_size, "relative/" + os.path.basename(ring.path), None, 3):
            assert RingReader.open(path) is None, path
    finally:
        os.unlink(link)
        os.unlink(wrong_size)
