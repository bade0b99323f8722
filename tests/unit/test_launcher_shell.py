"""The launcher's shell over fake processes and a fake clock: what it starts, stops and reports, in milliseconds.

The decisions themselves are tested in test_supervision.py; these check that the shell turns what its processes
do into events and carries out what `supervision.step` decides.
"""

import io
import itertools
import json
import sys
import os
import threading
import time

import pytest

from elastimator.cluster.launcher import Launcher, LaunchSpec


class FakeProcess:
    """A task's process: exits when the test sets `code`; remembers the signals it got."""

    pids = itertools.count(1000)

    def __init__(self, name: str, output: str = "", code: int | None = None):
        self.name, self.pid, self.code = name, next(self.pids), code
        self.stdout = io.StringIO(output)
        self.signals: list[str] = []

    def poll(self):
        return self.code

    def terminate(self):
        self.signals.append("TERM")
        if self.code is None:
            self.code = -15

    def kill(self):
        self.signals.append("KILL")
        if self.code is None:
            self.code = -9

    def wait(self, timeout=None):
        return self.code


class FakeCluster:
    """Starts FakeProcesses for the launcher; `outputs` and `codes` script a task's first start."""

    def __init__(self, outputs=None, codes=None):
        self.started: list[FakeProcess] = []
        self._outputs, self._codes = dict(outputs or {}), dict(codes or {})
        self._lock = threading.Lock()

    def spawn(self, command, env):
        task = json.loads(env["TF_CONFIG"])["task"]
        name = f"{task['type']}-{task['index']}"
        process = FakeProcess(name, self._outputs.pop(name, ""), self._codes.pop(name, None))
        process.command = command
        with self._lock:
            self.started.append(process)
        return process

    def latest(self, name: str) -> FakeProcess | None:
        with self._lock:
            return next((p for p in reversed(self.started) if p.name == name), None)

    def starts(self, name: str) -> int:
        with self._lock:
            return sum(1 for p in self.started if p.name == name)


class Console(list):
    def write(self, text):
        self.append(text)

    def flush(self):
        pass


def fake_clock(step: float = 0.05):
    """Each look at the clock is `step` seconds after the last."""
    ticks = itertools.count()
    return lambda: next(ticks) * step


def launch(tmp_path, cluster, **spec):
    console = Console()
    launcher = Launcher(LaunchSpec("conf.py:Conf", str(tmp_path / "model"), network="host", **spec), out=console,
                        clock=fake_clock(), spawn=cluster.spawn, probe=lambda address: True, turn_secs=0.001)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", launcher.run()), daemon=True)
    thread.start()
    return launcher, console, thread, result


def wait_for(predicate, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def test_a_dead_worker_is_restarted_and_the_job_ends_when_the_chief_has_finished(tmp_path):
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1, backoff_secs=1.0)
    wait_for(lambda: any(e["event"] == "up" and e["task"] == "worker-0" for e in launcher.events), "worker-0 up")
    cluster.latest("worker-0").code = -9
    wait_for(lambda: cluster.starts("worker-0") == 2, "worker-0's restart")
    cluster.latest("worker-0").code = 0
    cluster.latest("chief-0").code = 0
    thread.join(timeout=10)
    assert result == {"code": 0}, "".join(console)
    assert cluster.latest("ps-0").signals == ["TERM"]  # stopped once the trainers were done
    kinds = [(e["event"], e["task"]) for e in launcher.events if e["task"] == "worker-0"]
    assert kinds[:4] == [("start", "worker-0"), ("up", "worker-0"), ("exit", "worker-0"), ("restart", "worker-0")]
    assert launcher.restarts() == {"worker-0": 1}
    assert any("worker-0 exited with code -9; restarting it in 1.0s" in line for line in console)


def test_with_an_evaluator_the_trainers_run_at_a_lower_cpu_priority(tmp_path):
    cluster = FakeCluster()
    launcher, _, thread, result = launch(tmp_path, cluster, ps=1, workers=1, evaluator=True)
    _stop_once_started(launcher, thread, cluster, 4)
    niced = {p.name: p.command[:3] == ["nice", "-n", "5"] for p in cluster.started}
    assert niced == {"ps-0": False, "chief-0": True, "worker-0": True, "evaluator-0": False}
    assert cluster.latest("chief-0").command[3:6] == [sys.executable, "-m", "elastimator.cli"]


def test_a_first_step_is_learned_from_the_progress_file(tmp_path):
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1)
    wait_for(lambda: cluster.latest("worker-0") is not None, "worker-0's start")
    with open(os.path.join(tmp_path, "model", "logs", "worker-0.progress.json"), "w") as f:
        json.dump({"step": 3, "time": 0}, f)
    wait_for(lambda: any(e["event"] == "first_step" for e in launcher.events), "the first_step event")
    launcher.request_stop()
    thread.join(timeout=10)
    assert [e["task"] for e in launcher.events if e["event"] == "first_step"] == ["worker-0"]


def _stop_once_started(launcher, thread, cluster, processes: int) -> None:
    wait_for(lambda: len(cluster.started) == processes, f"{processes} processes")
    launcher.request_stop()
    thread.join(timeout=10)


def test_a_stop_request_terminates_every_process_and_returns_130(tmp_path):
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=2, workers=2, evaluator=True)
    _stop_once_started(launcher, thread, cluster, 6)
    assert result == {"code": 130}
    assert all(p.signals == ["TERM"] for p in cluster.started)
    with open(os.path.join(tmp_path, "model", "launcher", "state.json")) as f:
        assert json.load(f)["running"] is False


def test_a_failure_that_would_repeat_names_the_error_line_it_printed(tmp_path):
    cluster = FakeCluster(outputs={"chief-0": "elastimator: error: Loss became nan at global step 8\n"},
                          codes={"chief-0": 3})
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1)
    thread.join(timeout=10)
    assert result == {"code": 1}
    assert any("chief-0 failed in a way a restart would repeat, so the job ends here: Loss became nan at global "
               "step 8" in line for line in console), "".join(console)
    assert cluster.starts("chief-0") == 1


@pytest.mark.parametrize("request_text", ['{"workers": 2}', "not json"])
def test_a_scale_request_file_is_carried_out_or_refused_with_a_reason(tmp_path, request_text):
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1, max_workers=2)
    wait_for(lambda: os.path.exists(tmp_path / "model" / "launcher" / "state.json"), "the state file")
    (tmp_path / "model" / "launcher" / "scale.json").write_text(request_text)
    if request_text.startswith("{"):
        wait_for(lambda: cluster.latest("worker-1") is not None, "worker-1's start")
    else:
        wait_for(lambda: any("ignoring the scale request" in line for line in console), "the refusal")
    launcher.request_stop()
    thread.join(timeout=10)
    assert result == {"code": 130}


def test_a_scale_request_left_by_an_earlier_launch_is_dropped_and_said(tmp_path):
    """A relaunch with --workers 1 after an earlier `scale --workers 2` scaled to 2, unasked."""
    (tmp_path / "model" / "launcher").mkdir(parents=True)
    (tmp_path / "model" / "launcher" / "scale.json").write_text('{"workers": 2, "requested_at": 1}')
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1, max_workers=2)
    wait_for(lambda: os.path.exists(tmp_path / "model" / "launcher" / "state.json"), "the state file")
    # A turn that sees worker-0 listen has read the request file too, and would have started worker-1.
    wait_for(lambda: any(e["event"] == "up" and e["task"] == "worker-0" for e in launcher.events), "worker-0 up")
    launcher.request_stop()
    thread.join(timeout=10)
    assert cluster.latest("worker-1") is None, "".join(console)
    assert not any(e["event"] == "scale" for e in launcher.events)
    assert any("dropped the scale request for 2 worker(s) that an earlier launch left in" in line
               and "--workers 1 on the command line wins" in line for line in console), "".join(console)
    assert not (tmp_path / "model" / "launcher" / "scale.json").exists()
