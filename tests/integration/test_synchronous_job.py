"""`elastimator launch` of a synchronous job (strategy 'multi_worker_mirrored'): the counting job as a chief and
workers that all-reduce, with no parameter server; a worker killed mid-job, and a scale from 2 to 3 trainers.

The counting model counts each record's trainings (tests/integration/counting_conf.py, COUNT_SYNC=1). What the
tests hold the job to:

* no record lost: every record trained at least once per epoch;
* bounded replay: a failure replays what the group trained since the newest checkpoint (at most `save_steps`
  steps of every trainer's batch) and the one batch per trainer its seal may not know of; at the end of the job
  a worker whose input ended first trains its last batch again while the others finish their shards (at most a
  shard per trainer).
"""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from elastimator.cluster.launcher import Launcher, LaunchSpec

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "tests", "integration", "counting_conf.py") + ":CountingConf"
RECORDS, EPOCHS, BATCH, SHARD = 2000, 2, 10, 50
SAVE_STEPS = 40
"""The counting conf's save_steps."""


class Console(list):
    def write(self, text):
        self.append(text)

    def flush(self):
        pass


@pytest.fixture
def job(tmp_path, monkeypatch):
    data = tmp_path / "ids.csv"
    data.write_text("".join(f"{i},{i % 2}\n" for i in range(RECORDS)))
    for name, value in {"COUNT_SYNC": "1", "COUNT_DATA": str(data), "COUNT_RECORDS": str(RECORDS),
                        "COUNT_MODEL_DIR": str(tmp_path / "model"), "COUNT_STEP_SECS": "0.08",
                        "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}.items():
        monkeypatch.setenv(name, value)
    return tmp_path / "model"


def _run(launcher: Launcher) -> tuple[threading.Thread, dict]:
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", launcher.run()))
    thread.start()
    return thread, result


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _launch_until_a_checkpoint(job, **spec_fields):
    """Launches the synchronous counting job (a chief and 2 workers, unless `spec_fields` say) and waits for its
    checkpoint of step SAVE_STEPS; returns (launcher, console, thread, result)."""
    spec = LaunchSpec(CONF, str(job), **{"workers": 2, "synchronous": True, "backoff_secs": 0.5, "network": "host",
                                         **spec_fields})
    console = Console()
    launcher = Launcher(spec, out=console)
    thread, result = _run(launcher)
    _wait_for(lambda: os.path.isdir(job) and [s for s in _checkpoint_steps(job) if s >= SAVE_STEPS]
              or not thread.is_alive(), 300, f"the checkpoint of step {SAVE_STEPS}")
    return launcher, console, thread, result


def _pid(launcher, task) -> int:
    return next(e["pid"] for e in launcher.events if e["event"] == "start" and e["task"] == task)


def _checkpoint_steps(model_dir) -> list[int]:
    return sorted(int(name[len("model.ckpt-"):-len(".index")]) for name in os.listdir(model_dir)
                  if name.startswith("model.ckpt-") and name.endswith(".index"))


def _replays(model_dir) -> np.ndarray:
    counts = tf.train.load_variable(tf.train.latest_checkpoint(str(model_dir)), "counts")
    assert counts.min() >= EPOCHS, f"records lost: {np.flatnonzero(counts < EPOCHS)[:20]}"
    return int(counts.sum() - EPOCHS * RECORDS)


def test_a_synchronous_conf_runs_alone_under_elastimator_run(job):
    """One process, the strategy over this process alone (`elastimator run` sets a TF_CONFIG naming no ps and no
    other worker, which a synchronous conf must accept): every record trained once per epoch."""
    env = dict(os.environ, COUNT_STEP_SECS="0")
    result = subprocess.run([sys.executable, "-m", "elastimator.cli", "run", CONF, "--no-progress"],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _replays(job) == 0


def _kill_until_the_end(launched, task: str) -> str:
    """SIGKILLs `task` of a launched job and waits for its end: 0, after one restart of the group for `task`.
    Returns the console's last lines."""
    launcher, console, thread, result = launched
    try:
        os.kill(_pid(launcher, task), signal.SIGKILL)
    finally:
        thread.join(timeout=400)
    output = "".join(console[-80:])
    assert not thread.is_alive() and result["code"] == 0, output
    restarts = [e for e in launcher.events if e["event"] == "restart"]
    assert [(e["task"], e["group"]) for e in restarts] == [(task, True)], output
    return output


def _replays_within_the_bound(job, replicas: int, output: str, detail: str = "") -> None:
    """No record lost, and what was trained again within the bound: the steps since the newest checkpoint and
    the one call per process its seal may not know of (a batch per replica each), and the end of the job's
    filler (at most a shard per replica)."""
    bound = (SAVE_STEPS + 1) * replicas * BATCH + replicas * SHARD
    replays = _replays(job)
    print(f"{replays} records replayed (bound {bound}){detail}")
    assert replays <= bound, output


def test_a_killed_worker_restarts_the_group_from_the_newest_checkpoint_and_loses_no_record(job):
    launched = _launch_until_a_checkpoint(job)
    output = _kill_until_the_end(launched, "worker-1")
    # Every trainer started twice: the group, and the group again.
    starts = [e["task"] for e in launched[0].events if e["event"] == "start"]
    assert sorted(starts) == ["chief-0"] * 2 + ["worker-0"] * 2 + ["worker-1"] * 2, output
    assert "a synchronous step needs every worker, so the chief and workers start again" in output
    _replays_within_the_bound(job, 3, output)


def test_a_frozen_worker_restarts_the_group_within_the_stall_bound_and_loses_no_record(job):
    """A worker stopped with SIGSTOP (a hung NFS read, a paused VM) keeps its port answering, so no probe sees it,
    and every other trainer waits in its all-reduce: the launcher sees no step for stall_secs, stops the group
    (killing the frozen worker) and starts it again from the newest checkpoint."""
    stall_secs = 10.0
    launcher, console, thread, result = _launch_until_a_checkpoint(job, stall_secs=stall_secs)
    try:
        frozen_at = time.monotonic()
        os.kill(_pid(launcher, "worker-1"), signal.SIGSTOP)
        _wait_for(lambda: any(e["event"] == "restart" for e in launcher.events) or not thread.is_alive(), 180,
                  "the group's restart")
        detected_after = time.monotonic() - frozen_at
    finally:
        thread.join(timeout=400)
    output = "".join(console[-80:])
    assert not thread.is_alive() and result["code"] == 0, output
    restarts = [e for e in launcher.events if e["event"] == "restart"]
    assert len(restarts) == 1 and restarts[0]["group"] and restarts[0]["stalled"], output
    # Progress files are written every 5 s while a trainer steps; the bound holds within that and the launcher's
    # turn, whatever the machine's load.
    assert detected_after < stall_secs + 5 + 30, detected_after
    assert "made no training step for" in output
    _replays_within_the_bound(job, 3, output, f"; the stall was acted on after {detected_after:.1f} s")


def test_two_replicas_per_process_read_through_the_shard_service_and_a_kill_loses_no_record(job, monkeypatch):
    """The several-devices worker (a multi-GPU machine), over two logical CPU devices per process: a chief and a
    worker of two replicas each, every replica training a batch of its own from its process's shards and each
    batch reported; a worker killed mid-job restarts the group from the newest checkpoint."""
    monkeypatch.setenv("COUNT_REPLICAS", "2")
    output = _kill_until_the_end(_launch_until_a_checkpoint(job, workers=1), "worker-0")
    replicas = 2 * 2
    _replays_within_the_bound(job, replicas, output)
    # Every step trained a batch on each of the four replicas: more records per step than two processes of one
    # replica each could train (the last steps' fillers may train fewer).
    newest = tf.train.latest_checkpoint(str(job))
    steps, trained = tf.train.load_variable(newest, "global_step"), tf.train.load_variable(newest, "counts").sum()
    assert 2 * BATCH * steps < trained <= replicas * BATCH * steps, (steps, trained)


def test_a_scale_from_two_to_three_trainers_goes_on_from_the_checkpoint_the_chief_saves(job):
    spec = LaunchSpec(CONF, str(job), workers=1, max_workers=2, synchronous=True, network="host")
    console = Console()
    launcher = Launcher(spec, out=console)
    thread, result = _run(launcher)
    try:
        _wait_for(lambda: [e for e in launcher.events if e["event"] == "first_step" and e["task"] == "worker-0"]
                  or not thread.is_alive(), 300, "worker-0's first step")
        launcher.scale(2)
        _wait_for(lambda: [e for e in launcher.events if e["event"] == "first_step" and e["task"] == "worker-1"]
                  or not thread.is_alive(), 300, "worker-1's first step")
    finally:
        thread.join(timeout=400)
    output = "".join(console[-80:])
    assert not thread.is_alive() and result["code"] == 0, output
    assert [e for e in launcher.events if e["event"] == "first_step" and e["task"] == "worker-1"], \
        f"the job ended before the added worker trained:\n{output}"
    assert not launcher.restarts(), output  # a scale is no failure
    assert not [e for e in launcher.events if e["event"] == "restart"], output
    # The chief saved as it stopped: the group resumed from its last step, and replayed at most a batch per
    # trainer that its seal did not know of, and the end of the job's filler.
    bound = 3 * BATCH + 3 * SHARD
    replays = _replays(job)
    print(f"{replays} records replayed (bound {bound})")
    assert replays <= bound, output
