"""Chaos: the counting job under `elastimator launch` through a seeded random schedule of faults (kills, and freezes
held 8-25 s, of the chief, the ps, the workers and the evaluator, some landing while the job still recovers from
the one before; tests/integration/chaos.py). A parameter-server job and a synchronous job each end with exit 0, no
record lost, and what was trained again within the documented bound per fault (docs/jobs.md).

The seed and the schedule are printed (and in every failure's message): CHAOS_SEED=N replays a schedule; without
it each run draws a new one. Where tasks can have network namespaces (root), each job runs one schedule that
also cuts networks; CHAOS_ALL=1 runs the schedules without cuts as well. Faults land at global steps, not at times, and the bounds are counts of records, so
the outcome does not depend on the machine's load.
"""

import json
import os
import random
import shutil
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from elastimator.cluster.launcher import Launcher, LaunchSpec, _popen
from elastimator.cluster.plan import ClusterPlan
from tests.integration.chaos import Chaos, describe, schedule
from tests.integration.counting_job import Network

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]
"""A run takes 2-3.5 minutes on a loaded 2-core machine; the timeout leaves room for a much slower one."""
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "tests", "integration", "counting_conf.py") + ":CountingConf"
RECORDS, EPOCHS, BATCH, SHARD, SAVE_STEPS = 3000, 2, 10, 50, 40
"""The counting conf's batch, shard and save_steps; records enough for a job that outlasts its schedule."""
MAX_RESTARTS = 3
STEP_SECS = 0.3
"""Each step sleeps this long (no CPU): the job takes minutes of steps whatever the machine's load."""


class Console(list):
    def write(self, text):
        self.append(text)

    def flush(self):
        pass


def seed() -> int:
    return int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else random.SystemRandom().randrange(10**6)


@pytest.fixture
def counting(tmp_path, monkeypatch):
    data = tmp_path / "ids.csv"
    data.write_text("".join(f"{i},{i % 2}\n" for i in range(RECORDS)))
    for name, value in {"COUNT_DATA": str(data), "COUNT_RECORDS": str(RECORDS), "COUNT_EVAL": "1",
                        "COUNT_MODEL_DIR": str(tmp_path / "model"), "COUNT_STEP_SECS": str(STEP_SECS),
                        "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}.items():
        monkeypatch.setenv(name, value)
    return tmp_path / "model"


def run_chaos(spec: LaunchSpec, faults, chaos_seed: int, launcher: Launcher | None = None,
              console: Console | None = None, cut=None) -> dict:
    """Runs the job through the schedule; returns what happened (exit code, landed faults, replays, wall time)."""
    print(describe(chaos_seed, faults), flush=True)
    console = Console() if console is None else console
    launcher = launcher or Launcher(spec, out=console)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", launcher.run()))
    started = time.monotonic()
    thread.start()
    chaos = Chaos(launcher, faults, spec.max_restarts, over=lambda: not thread.is_alive(), cut=cut).start()
    try:
        thread.join(timeout=900)  # then the context below says where it hung
    finally:
        chaos.stop()
        if thread.is_alive():
            launcher.request_stop()
            thread.join(timeout=120)
    wall = time.monotonic() - started
    context = (f"{describe(chaos_seed, faults)}\n{chaos.summary()}\nrestarts: {launcher.restarts()}\n"
               + "".join(console[-150:]))
    assert result.get("code") == 0, context
    counts = tf.train.load_variable(tf.train.latest_checkpoint(spec.model_dir), "counts")
    assert counts.min() >= EPOCHS, f"records lost: {np.flatnonzero(counts < EPOCHS)[:20]}\n{context}"
    restarts = [e for e in launcher.events if e["event"] == "restart"]
    return {"landed": chaos.landed, "replays": int(counts.sum() - EPOCHS * RECORDS), "wall": wall,
            "restarts": restarts, "context": context}


def report(what: str, outcome: dict, bound: int) -> None:
    landed = outcome["landed"]
    per_fault = outcome["replays"] / max(1, len(landed))
    print(f"{what}: {len(landed)} faults landed ({', '.join(f'{l.fault.kind} {l.fault.task}' for l in landed)}), "
          f"{len(outcome['restarts'])} restarts ({sum(1 for r in outcome['restarts'] if r.get('group'))} of the "
          f"synchronous group), exit 0, 0 lost, {outcome['replays']} replayed "
          f"({per_fault:.1f} per fault; bound {bound}), {outcome['wall']:.0f} s", flush=True)


def namespaces_possible() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


ALSO_CUT = ("where tasks can have network namespaces of their own, the schedule with network cuts (below) runs "
            "instead: it holds kills and freezes too")


def test_a_parameter_server_job_through_a_random_schedule_of_kills_and_freezes(counting):
    """ps, chief, 2 workers and an evaluator; 8 faults. Each fault replays at most a batch per trainer (the steps
    in flight as it landed: the counts roll back with the checkpoint the ps or chief restarts from, and the book
    with its seal)."""
    if namespaces_possible() and not os.environ.get("CHAOS_ALL"):
        pytest.skip(ALSO_CUT)
    chaos_seed = seed()
    trainers, steps = 3, RECORDS * EPOCHS // BATCH
    faults = schedule(chaos_seed, 8, ["ps-0", "chief-0", "worker-0", "worker-1", "evaluator-0"], steps)
    spec = LaunchSpec(CONF, str(counting), ps=1, workers=2, evaluator=True, backoff_secs=0.5, network="host",
                      max_restarts=MAX_RESTARTS)
    outcome = run_chaos(spec, faults, chaos_seed)
    bound = len(outcome["landed"]) * trainers * BATCH
    report("parameter-server job", outcome, bound)
    assert len(outcome["landed"]) >= len(faults) // 2, outcome["context"]
    assert outcome["replays"] <= bound, outcome["context"]


def test_a_synchronous_job_through_a_random_schedule_of_kills_and_freezes(counting, monkeypatch):
    """chief, 2 workers and an evaluator, all-reducing; 6 faults. A freeze past --stall-secs (15 s here) restarts
    the group as a death does. Each fault replays at most what the group trained since the newest checkpoint and a
    batch per trainer (save_steps + 1 steps of every trainer's batch), and the job's end a shard per trainer."""
    if namespaces_possible() and not os.environ.get("CHAOS_ALL"):
        pytest.skip(ALSO_CUT)
    monkeypatch.setenv("COUNT_SYNC", "1")
    chaos_seed = seed()
    trainers = 3
    steps = RECORDS * EPOCHS // (BATCH * trainers)
    faults = schedule(chaos_seed, 6, ["chief-0", "worker-0", "worker-1", "evaluator-0"], steps)
    spec = LaunchSpec(CONF, str(counting), workers=2, evaluator=True, synchronous=True, backoff_secs=0.5,
                      network="host", max_restarts=MAX_RESTARTS, stall_secs=15)
    outcome = run_chaos(spec, faults, chaos_seed)
    bound = len(outcome["landed"]) * (SAVE_STEPS + 1) * trainers * BATCH + trainers * SHARD
    report("synchronous job", outcome, bound)
    assert len(outcome["landed"]) >= len(faults) // 2, outcome["context"]
    assert outcome["replays"] <= bound, outcome["context"]


# --- partitions: each task in a network namespace of its own ---------------------------------------------------

NAMESPACED = ("ps0", "chief0", "worker0", "worker1", "evaluator0")


@pytest.fixture
def network():
    if not namespaces_possible():
        pytest.skip("needs root and iproute2 to give each task a network namespace of its own")
    network = Network(NAMESPACED)
    try:
        network.create()
    except OSError as e:
        network.delete()
        pytest.skip(f"cannot make network namespaces here: {e}")
    yield network
    network.delete()


def _in_namespaces(spec: LaunchSpec, network: Network, console: Console) -> Launcher:
    """A launcher whose tasks each run in their namespace of `network` (as on hosts of their own, joined by a
    bridge the launcher's namespace is on), at their namespace's address."""

    def spawn(command, env):
        task = json.loads(env["TF_CONFIG"])["task"]
        return _popen(["ip", "netns", "exec", network.namespaces[f"{task['type']}{task['index']}"], *command], env)

    launcher = Launcher(spec, out=console, spawn=spawn)
    address = {task: f"{network.addresses[task]}:2222" for task in NAMESPACED}
    launcher.plan = ClusterPlan(ps=() if spec.synchronous else (address["ps0"],), chief=address["chief0"],
                                worker_slots=(address["worker0"], address["worker1"]),
                                shard_service=f"{network.addresses['chief0']}:2223", token=launcher.plan.token,
                                synchronous=spec.synchronous)
    return launcher


def test_a_parameter_server_job_through_a_random_schedule_with_network_cuts(counting, network, monkeypatch):
    """As the first test, with cuts among the faults: a trainer's network down for 10-40 s (its namespace's link),
    then up. A cut worker is failed by the shard service past its heartbeat timeout and its shards are handed on;
    a cut chief's sessions and service come back with its link. Each fault: at most a batch per trainer."""
    monkeypatch.setenv("ELASTIMATOR_SHARD_SERVICE_LISTEN", f"{network.addresses['chief0']}:2223")
    chaos_seed = seed()
    trainers, steps = 3, RECORDS * EPOCHS // BATCH
    faults = schedule(chaos_seed, 8, ["ps-0", "chief-0", "worker-0", "worker-1", "evaluator-0"], steps,
                      kinds=("kill", "freeze", "cut"), cut_tasks=["chief-0", "worker-0", "worker-1"])
    spec = LaunchSpec(CONF, str(counting), ps=1, workers=2, evaluator=True, backoff_secs=0.5, network="host",
                      max_restarts=MAX_RESTARTS)
    console = Console()
    launcher = _in_namespaces(spec, network, console)
    outcome = run_chaos(spec, faults, chaos_seed, launcher=launcher, console=console,
                        cut=lambda task, up: network.set_link(task.replace("-", ""), up))
    bound = len(outcome["landed"]) * trainers * BATCH
    report("parameter-server job with cuts", outcome, bound)
    assert len(outcome["landed"]) >= len(faults) // 2, outcome["context"]
    assert outcome["replays"] <= bound, outcome["context"]


def test_a_synchronous_job_through_a_random_schedule_with_network_cuts(counting, network, monkeypatch):
    """As the synchronous test, with cuts among the faults: a trainer cut off fails its peers' all-reduce (or goes
    stale past --stall-secs), and the group starts again from the newest checkpoint once it can."""
    monkeypatch.setenv("COUNT_SYNC", "1")
    monkeypatch.setenv("ELASTIMATOR_SHARD_SERVICE_LISTEN", f"{network.addresses['chief0']}:2223")
    chaos_seed = seed()
    trainers = 3
    steps = RECORDS * EPOCHS // (BATCH * trainers)
    faults = schedule(chaos_seed, 6, ["chief-0", "worker-0", "worker-1", "evaluator-0"], steps,
                      kinds=("kill", "freeze", "cut"), cut_tasks=["chief-0", "worker-0", "worker-1"])
    spec = LaunchSpec(CONF, str(counting), workers=2, evaluator=True, synchronous=True, backoff_secs=0.5,
                      network="host", max_restarts=MAX_RESTARTS, stall_secs=15)
    console = Console()
    launcher = _in_namespaces(spec, network, console)
    outcome = run_chaos(spec, faults, chaos_seed, launcher=launcher, console=console,
                        cut=lambda task, up: network.set_link(task.replace("-", ""), up))
    bound = len(outcome["landed"]) * (SAVE_STEPS + 1) * trainers * BATCH + trainers * SHARD
    report("synchronous job with cuts", outcome, bound)
    assert len(outcome["landed"]) >= len(faults) // 2, outcome["context"]
    assert outcome["replays"] <= bound, outcome["context"]
