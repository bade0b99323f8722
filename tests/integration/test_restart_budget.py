"""The restart budget under `elastimator launch`, on the synchronous counting job (a chief and a worker that
all-reduce): more chief faults than `max_restarts`, each after the job made progress, end in exit 0 with every
record trained; a chief killed every time it starts (a crash loop) still ends the job after `max_restarts`
restarts, saying why.

The bounds are counts of starts and checkpoints, never seconds: the machine may be loaded.
"""

import os
import signal

import pytest

from elastimator.cluster.launcher import Launcher, LaunchSpec
from tests.integration.test_synchronous_job import (BATCH, CONF, SAVE_STEPS, SHARD, Console, _replays, _run,
                                                    _wait_for, job)  # noqa: F401  (job: the fixture)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
MAX_RESTARTS = 1
TRAINERS = 2


def _starts(launcher, task: str) -> list[dict]:
    return [e for e in launcher.events if e["event"] == "start" and e["task"] == task]


def _launch(job) -> tuple[Launcher, Console, object, dict]:
    spec = LaunchSpec(CONF, str(job), workers=1, synchronous=True, backoff_secs=0.5, network="host",
                      max_restarts=MAX_RESTARTS)
    console = Console()
    launcher = Launcher(spec, out=console)
    thread, result = _run(launcher)
    return launcher, console, thread, result


def test_more_chief_faults_than_max_restarts_with_progress_between_finish_with_every_record(job):
    launcher, console, thread, result = _launch(job)
    faults = MAX_RESTARTS + 1
    try:
        for fault in range(faults):
            # Progress since the last restart (the first: since the start): a newer checkpoint than the one it
            # resumed from, which gave the budget back.
            _wait_for(lambda: fault == 0 and [e for e in launcher.events if e["event"] == "checkpoint"
                                              and e["step"] >= SAVE_STEPS]
                      or len([e for e in launcher.events if e["event"] == "progress"]) >= fault > 0
                      or not thread.is_alive(), 400, f"progress before fault {fault + 1}")
            assert thread.is_alive(), "".join(console[-80:])
            os.kill(_starts(launcher, "chief-0")[-1]["pid"], signal.SIGKILL)
            _wait_for(lambda: len(_starts(launcher, "chief-0")) > fault + 1 or not thread.is_alive(), 400,
                      f"the group's restart {fault + 1}")
    finally:
        thread.join(timeout=600)
    output = "".join(console[-120:])
    assert not thread.is_alive() and result["code"] == 0, output
    assert [e["task"] for e in launcher.events if e["event"] == "restart"] == ["chief-0"] * faults, output
    assert launcher.restarts() == {"chief-0": faults, "worker-0": faults}, output
    assert "restarts count from 0 again" in output
    # Each fault replays what the group trained since the newest checkpoint and a batch per trainer its seal may
    # not know of; the end of the job a shard per trainer (test_synchronous_job's bound, per fault).
    bound = faults * (SAVE_STEPS + 1) * TRAINERS * BATCH + TRAINERS * SHARD
    replays = _replays(job)
    print(f"{faults} chief kills with progress between (max_restarts {MAX_RESTARTS}): {replays} records replayed "
          f"(bound {bound})")
    assert replays <= bound, output


def test_a_chief_killed_each_time_it_starts_ends_the_job_after_max_restarts_with_its_cause(job):
    launcher, console, thread, result = _launch(job)
    killed = 0
    try:
        while thread.is_alive():
            _wait_for(lambda: len(_starts(launcher, "chief-0")) > killed or not thread.is_alive(), 400,
                      "the chief's next start")
            if not thread.is_alive():
                break
            os.kill(_starts(launcher, "chief-0")[killed]["pid"], signal.SIGKILL)  # before it can train a step
            killed += 1
    finally:
        thread.join(timeout=600)
    output = "".join(console[-80:])
    assert result["code"] == 1, output
    assert killed == len(_starts(launcher, "chief-0")) == MAX_RESTARTS + 1, output
    assert not [e for e in launcher.events if e["event"] == "progress"], output
    assert (f"chief-0 exited with code -9, and the group of chief and workers was already started again "
            f"{MAX_RESTARTS} time(s) with no progress between them (not any checkpoint); giving up") in output
