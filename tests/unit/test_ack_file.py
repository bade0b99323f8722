"""The ack file: the step's graph check passes only on a counted last report and a current lease, and the service
takes only a file that is really a worker's ack file."""

import os
import threading

import numpy as np
import pytest
import tensorflow as tf

from elastimator.elastic import ack_file
from elastimator.elastic.ack_file import AckFile, AckWriter, gate_floor

pytestmark = pytest.mark.skipif(not os.path.isdir(ack_file.ACK_DIR), reason="ack files live in /dev/shm")
RUN = 7 << 32
"""Leases and floors of one run of the service."""


@pytest.fixture
def acks():
    acks = AckFile.create()
    yield acks
    acks.close()


class Check:
    """The graph check on a batch tag, run in a session of its own."""

    def __init__(self, acks: AckFile):
        self._graph = tf.Graph()
        with self._graph.as_default():
            self._tag = tf.compat.v1.placeholder(tf.int64, [4])
            self._passed = acks.fast_check(self._tag)
        self._session = tf.compat.v1.Session(graph=self._graph)

    def __call__(self, lease: int) -> bool:
        return bool(self._session.run(self._passed, {self._tag: np.array([3, lease, 0, 5])}))


def test_the_check_passes_once_the_last_report_is_counted_and_the_lease_is_current(acks):
    check = Check(acks)
    service = AckWriter.open(acks.path)
    assert not check(RUN + 5)  # a new file: nothing to go by, Python checks
    acks.set_floor(RUN + 3)
    assert not check(RUN + 5)  # no report out yet: disarmed
    acks.await_report(1)
    assert not check(RUN + 5)  # out, not counted
    service.acknowledge(1)
    assert check(RUN + 5) and check(RUN + 3)
    assert not check(RUN + 2)  # below the floor: taken back
    assert not check((8 << 32) + 5)  # another run of the service
    acks.await_report(2)
    assert not check(RUN + 5)
    service.acknowledge(2)
    assert check(RUN + 5)
    acks.disarm()  # the last report went another way
    assert not check(RUN + 5)
    acks.await_report(2)
    acks.set_floor(None)  # a refused lease the floor does not cover
    assert not check(RUN + 5)
    service.close()


def test_the_python_check_waits_until_the_service_has_counted_the_report_or_not(acks):
    service = AckWriter.open(acks.path)
    assert not acks.wait_for(1, timeout_secs=0.05)  # unheard of: sent again, answered
    service.acknowledge(1)
    assert acks.wait_for(1, timeout_secs=5)
    service.not_counted(2)  # a seal held it back, or the book refused it
    assert not acks.wait_for(2, timeout_secs=5)
    counted = threading.Timer(0.05, service.acknowledge, args=(3,))
    counted.start()
    assert acks.wait_for(3, timeout_secs=5)
    counted.join()
    service.close()


def test_a_worker_makes_its_file_and_its_step_reads_it_after_the_name_is_gone(acks):
    assert os.path.dirname(acks.path) == ack_file.ACK_DIR and os.path.getsize(acks.path) == ack_file.SIZE
    check = Check(acks)
    service = AckWriter.open(acks.path)
    acks.forget_path()  # as once the service has opened it
    assert not os.path.exists(acks.path)
    acks.set_floor(RUN)
    acks.await_report(1)
    service.acknowledge(1)
    assert check(RUN + 1)
    service.close()
    acks.close()
    acks.close()  # again: nothing


def test_the_service_takes_only_a_workers_ack_file(acks, tmp_path):
    assert AckWriter.open(acks.path) is not None
    elsewhere = tmp_path / os.path.basename(acks.path)
    elsewhere.write_bytes(bytes(ack_file.SIZE))
    link = os.path.join(ack_file.ACK_DIR, ack_file.PREFIX + "link_test")
    os.symlink(acks.path, link)
    odd_name = os.path.join(ack_file.ACK_DIR, "not-an-ack-file")
    wrong_size = os.path.join(ack_file.ACK_DIR, ack_file.PREFIX + "short_test")
    with open(wrong_size, "wb") as f:
        f.write(b"12")
    try:
        for path in (str(elsewhere), link, odd_name, wrong_size, "relative/" + os.path.basename(acks.path), None, 3):
            assert AckWriter.open(path) is None, path
    finally:
        os.unlink(link)
        os.unlink(wrong_size)


def test_the_gate_checks_the_floor_only_while_every_refused_lease_lies_below_it():
    assert gate_floor(None, []) is None
    assert gate_floor(RUN + 10, []) == RUN + 10
    assert gate_floor(RUN + 10, [RUN + 4, RUN + 9]) == RUN + 10
    assert gate_floor(RUN + 10, [RUN + 4, RUN + 10]) is None  # a refused lease the floor lets through
    assert gate_floor(RUN + 10, [(6 << 32) + 20]) == RUN + 10  # an older run's: no batch of it passes anyway
