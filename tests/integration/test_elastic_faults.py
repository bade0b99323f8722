"""Elastic sharding under failures: real ps, chief and two workers on loopback, each killed in turn.

The model only counts how many times it trained each record id. After each run the final checkpoint's
counts must show every record trained at least once per epoch, and replays bounded by one batch per
trainer per failure.
"""

import signal
import time

import pytest

from tests.integration.counting_job import BATCH, ID_SCALE, RECORDS, Job, check_counts

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def job(tmp_path):
    job = Job(tmp_path)
    yield job
    job.stop()
    for log in job.logs:
        log.close()


def test_a_worker_killed_mid_epoch(job):
    job.start_all()
    job.wait_for_progress(0.3)
    job.kill("worker1")
    codes = job.wait_all()
    codes.pop("worker1")
    assert codes == {"ps0": 0, "chief0": 0, "worker0": 0}, job.output()
    replays = check_counts(job, failures=1)
    print(f"worker killed: {replays} record(s) replayed")


@pytest.mark.parametrize("role", ["ps", "chief"])
def test_a_killed_and_restarted_task(job, role):
    job.start_all()
    job.wait_for_progress(0.3)
    job.kill(f"{role}0")
    job.start(role, 0)
    codes = job.wait_all()
    assert codes == {"ps0": 0, "chief0": 0, "worker0": 0, "worker1": 0}, job.output()
    replays = check_counts(job, failures=1)
    print(f"{role} killed and restarted: {replays} record(s) replayed")


def test_a_killed_and_restarted_ps_loses_no_embedding_id(tmp_path):
    """The ps holds an embedding variable's tables; killed, it comes back from the checkpoint with every id it had,
    and the ids trained since are trained again (their shards replayed), so the final table has them all."""
    job = Job(tmp_path, embedding=True)
    try:
        job.start_all()
        job.wait_for_progress(0.3)
        job.kill("ps0")
        job.start("ps", 0)
        codes = job.wait_all()
        assert codes == {"ps0": 0, "chief0": 0, "worker0": 0, "worker1": 0}, job.output()
        check_counts(job, failures=1)
        assert job.embedding_ids() == {i * ID_SCALE for i in range(RECORDS)}
    finally:
        job.stop()
        for log in job.logs:
            log.close()


def test_a_frozen_worker_replays_at_most_the_batch_it_was_frozen_in(job):
    """Issue 15: SIGSTOP past the heartbeat timeout, then SIGCONT. The service gave the worker's shards to
    others meanwhile; once resumed, it drops every batch it had queued of them (it replayed one per shard
    it held before), so the only replay is the batch of the step it was frozen in."""
    job.start_all()
    job.wait_for_progress(0.3)
    job.processes["worker0"].send_signal(signal.SIGSTOP)
    time.sleep(8)  # ELASTIMATOR_WORKER_TIMEOUT_SECS is 3: the service fails the worker and hands its shards out
    job.processes["worker0"].send_signal(signal.SIGCONT)
    codes = job.wait_all()
    assert codes == {"ps0": 0, "chief0": 0, "worker0": 0, "worker1": 0}, job.output()
    replays = check_counts(job, failures=1)
    assert replays <= BATCH, f"{replays} records replayed\n{job.output()}"
