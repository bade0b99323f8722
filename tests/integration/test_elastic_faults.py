"""Elastic sharding under failures: real ps, chief and two workers on loopback, each killed in turn.

The model only counts how many times it trained each record id. After each run the final checkpoint's
counts must show every record trained at least once per epoch, and replays bounded by one batch per
trainer per failure.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from elastimator.elastic.service import ShardClient
from elastimator.elastic.shards import ShardServiceError
from tests.helpers import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "tests", "integration", "counting_conf.py") + ":CountingConf"
RECORDS, EPOCHS, BATCH, TRAINERS = 2000, 2, 10, 3
TOKEN = "fault-test-token"


class Job:
    """ps, chief and two workers of the counting job, each `elastimator run` in its own process."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        data = tmp_path / "ids.csv"
        data.write_text("".join(f"{i},{i % 2}\n" for i in range(RECORDS)))
        ps, chief, w0, w1, service = free_ports(5)
        self.cluster = {"ps": [f"127.0.0.1:{ps}"], "chief": [f"127.0.0.1:{chief}"],
                        "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]}
        self.service = f"127.0.0.1:{service}"
        self.model_dir = str(tmp_path / "model")
        self.env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", COUNT_DATA=str(data),
                        COUNT_RECORDS=str(RECORDS), COUNT_MODEL_DIR=self.model_dir,
                        ELASTIMATOR_SHARD_SERVICE=self.service, ELASTIMATOR_JOB_TOKEN=TOKEN,
                        ELASTIMATOR_WORKER_TIMEOUT_SECS="3")
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs = []

    def start(self, role: str, index: int = 0) -> None:
        env = dict(self.env, TF_CONFIG=json.dumps({"cluster": self.cluster, "task": {"type": role, "index": index}}))
        log = open(self.dir / f"{role}{index}-{len(self.logs)}.log", "w+")
        self.logs.append(log)
        cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
        self.processes[f"{role}{index}"] = subprocess.Popen([cli, "run", CONF, "--no-progress"], stdout=log,
                                                            stderr=subprocess.STDOUT, env=env)

    def start_all(self) -> None:
        for role, index in (("ps", 0), ("chief", 0), ("worker", 0), ("worker", 1)):
            self.start(role, index)

    def trained_records(self) -> int:
        client = ShardClient(self.service, TOKEN, worker="observer", timeout_secs=5)
        try:
            return client.status("train_set")["trained_records"]
        except ShardServiceError:
            return 0
        finally:
            client.close()

    def wait_for_progress(self, fraction: float, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.trained_records() < fraction * RECORDS * EPOCHS:
            assert time.monotonic() < deadline, self.output()
            for name, process in self.processes.items():
                assert process.poll() is None, f"{name} exited early:\n{self.output()}"
            time.sleep(0.2)

    def kill(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGKILL)
        self.processes[name].wait()

    def wait_all(self, timeout: float = 240) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        try:
            return {name: p.wait(timeout=max(1, deadline - time.monotonic())) for name, p in self.processes.items()}
        finally:
            self.stop()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def output(self) -> str:
        text = []
        for log in self.logs:
            log.seek(0)
            text.append(f"--- {os.path.basename(log.name)}\n{log.read()[-2500:]}")
        return "\n".join(text)

    def counts(self) -> np.ndarray:
        return tf.train.load_variable(tf.train.latest_checkpoint(self.model_dir), "counts")


def _check_counts(job: Job, failures: int) -> int:
    counts = job.counts()
    assert counts.min() >= EPOCHS, f"records lost: {np.flatnonzero(counts < EPOCHS)[:20]}\n{job.output()}"
    replays = int(counts.sum() - EPOCHS * RECORDS)
    assert replays <= failures * TRAINERS * BATCH, f"{replays} records replayed\n{job.output()}"
    return replays


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
    replays = _check_counts(job, failures=1)
    print(f"worker killed: {replays} record(s) replayed")


@pytest.mark.parametrize("role", ["ps", "chief"])
def test_a_killed_and_restarted_task(job, role):
    job.start_all()
    job.wait_for_progress(0.3)
    job.kill(f"{role}0")
    job.start(role, 0)
    codes = job.wait_all()
    assert codes == {"ps0": 0, "chief0": 0, "worker0": 0, "worker1": 0}, job.output()
    replays = _check_counts(job, failures=1)
    print(f"{role} killed and restarted: {replays} record(s) replayed")
