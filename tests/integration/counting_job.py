"""The counting job (ps, chief, two workers of tests/integration/counting_conf.py), for the fault tests.

The model only counts how many times it trained each record id; `check_counts` reads those counts back from
the final checkpoint: every record trained at least once per epoch, replays within one batch per trainer per
failure.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

from elastimator.elastic.client import ShardClient
from elastimator.elastic.shards import ShardServiceError
from tests.helpers import free_ports
from tests.integration.namespaces import free_subnet, link_name, namespace_name, remove_leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "tests", "integration", "counting_conf.py") + ":CountingConf"
RECORDS, EPOCHS, BATCH, TRAINERS = 2000, 2, 10, 3
TOKEN = "fault-test-token"
ID_SCALE = 1_000_003
"""Embedding jobs key record i's row by i * ID_SCALE: raw ids far beyond any table size."""


TASKS = ("ps0", "chief0", "worker0", "worker1")


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {result.stderr.strip()}")


class Network:
    """One network namespace per task, all on one bridge in this namespace (which reaches every task), as if
    each task ran on a host of its own. Root only; `set_link` cuts one task off."""

    def __init__(self, tasks: tuple[str, ...] = TASKS):
        remove_leftovers()
        self.subnet = free_subnet(216)
        self.bridge = link_name("b")
        self.namespaces = {task: namespace_name(task) for task in tasks}
        self.links = {task: (link_name("h", i), link_name("p", i)) for i, task in enumerate(tasks)}
        self.addresses = {task: f"{self.subnet}.{i + 1}" for i, task in enumerate(tasks)}
        self.bridge_address = f"{self.subnet}.254"

    def create(self) -> "Network":
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for task, namespace in self.namespaces.items():
            here, there = self.links[task]
            _ip("netns", "add", namespace)
            _ip("link", "add", here, "type", "veth", "peer", "name", there)
            _ip("link", "set", there, "netns", namespace)
            _ip("-n", namespace, "addr", "add", f"{self.addresses[task]}/24", "dev", there)
            _ip("-n", namespace, "link", "set", there, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("link", "set", here, "master", self.bridge)
            _ip("link", "set", here, "up")
        return self

    def delete(self) -> None:
        for task, namespace in self.namespaces.items():
            subprocess.run(["ip", "link", "del", self.links[task][0]], capture_output=True)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def set_link(self, task: str, up: bool) -> None:
        """Cuts `task` off from every other task (and back)."""
        _ip("-n", self.namespaces[task], "link", "set", self.links[task][1], "up" if up else "down")


class Job:
    """ps, chief and two workers of the counting job, each `elastimator run` in its own process: on loopback,
    or each in its own network namespace of `network`."""

    def __init__(self, tmp_path, network: Network | None = None, worker_timeout_secs: float = 3,
                 step_secs: float = 0.02, ps_for_workers: str | None = None, embedding: bool = False):
        """`ps_for_workers`: the ps address the workers use instead of the ps's own (a proxy in between)."""
        self.dir = tmp_path
        self.network = network
        data = tmp_path / "ids.csv"
        data.write_text("".join(f"{i},{i % 2}\n" for i in range(RECORDS)))
        if network is None:
            ps, chief, w0, w1, service = (f"127.0.0.1:{port}" for port in free_ports(5))
            listen = {}
        else:
            ps, chief, w0, w1 = (f"{network.addresses[task]}:2222" for task in TASKS)
            service = f"{network.addresses['chief0']}:2223"
            listen = {"ELASTIMATOR_SHARD_SERVICE_LISTEN": service}  # reached from the other namespaces
        self.cluster = {"ps": [ps], "chief": [chief], "worker": [w0, w1]}
        self.ps_for_workers = ps_for_workers
        self.service = service
        self.model_dir = str(tmp_path / "model")
        self.env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", COUNT_DATA=str(data),
                        COUNT_RECORDS=str(RECORDS), COUNT_MODEL_DIR=self.model_dir,
                        ELASTIMATOR_SHARD_SERVICE=self.service, ELASTIMATOR_JOB_TOKEN=TOKEN,
                        ELASTIMATOR_WORKER_TIMEOUT_SECS=str(worker_timeout_secs), COUNT_STEP_SECS=str(step_secs),
                        **listen, **({"COUNT_EMBEDDING_ID_SCALE": str(ID_SCALE)} if embedding else {}))
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs = []

    def start(self, role: str, index: int = 0) -> None:
        cluster = self.cluster
        if role == "worker" and self.ps_for_workers is not None:
            cluster = dict(cluster, ps=[self.ps_for_workers])
        env = dict(self.env, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": role, "index": index}}))
        log = open(self.dir / f"{role}{index}-{len(self.logs)}.log", "w+")
        self.logs.append(log)
        cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
        command = [cli, "run", CONF, "--no-progress"]
        if self.network is not None:
            command = ["ip", "netns", "exec", self.network.namespaces[f"{role}{index}"], *command]
        self.processes[f"{role}{index}"] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)

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

    def wait_for_progress(self, fraction: float, timeout: float = 120, start_timeout: float = 400) -> None:
        """Waits until `fraction` of the job's records are trained, failing when training stalls for `timeout`
        seconds, or has not begun within `start_timeout` (processes importing TensorFlow on a loaded machine
        take long to start: the clock that judges a stall runs from the job's last progress, not its start)."""
        trained = self.trained_records()
        deadline = time.monotonic() + (timeout if trained else start_timeout)
        while trained < fraction * RECORDS * EPOCHS:
            assert time.monotonic() < deadline, self.output()
            for name, process in self.processes.items():
                assert process.poll() is None, f"{name} exited early:\n{self.output()}"
            time.sleep(0.2)
            now = self.trained_records()
            if now > trained:
                trained, deadline = now, time.monotonic() + timeout

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

    def embedding_ids(self) -> set[int]:
        """The ids the final checkpoint's embedding variable has a row for (COUNT_EMBEDDING jobs)."""
        checkpoint = tf.train.latest_checkpoint(self.model_dir)
        return {int(k) for part in (0, 1) for k in tf.train.load_variable(checkpoint, f"ids/part_{part}/ids-keys")}


def check_counts(job: Job, failures: int) -> int:
    counts = job.counts()
    assert counts.min() >= EPOCHS, f"records lost: {np.flatnonzero(counts < EPOCHS)[:20]}\n{job.output()}"
    replays = int(counts.sum() - EPOCHS * RECORDS)
    assert replays <= failures * TRAINERS * BATCH, f"{replays} records replayed\n{job.output()}"
    return replays
