"""`elastimator launch`: the census job as ps, chief, workers and evaluator processes, with faults and scaling."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from elastimator.cluster.launcher import Launcher, LaunchSpec
from tests.helpers import read_events

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = os.path.join(ROOT, "tests", "integration", "launch_conf.py") + ":LaunchConf"
SINGLE_PROCESS_AUC = 0.8865
"""The census job in one process, 9,000 steps, as the fault test trains. It overfits past about 3,000 (0.9006
there, 0.8912 at 6,500): the same job's figure is the fair bar, not the best one."""


class Console(list):
    def write(self, text):
        self.append(text)

    def flush(self):
        pass


def _wait_for(predicate, timeout, what, launcher=None):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _first_steps(launcher, task):
    return [e for e in launcher.events if e["event"] == "first_step" and e["task"] == task]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_census_survives_a_killed_worker_and_takes_a_new_one(tmp_path):
    # Slow because five TensorFlow processes train on two cores while a sixth starts: the replacement takes
    # 1-2.5 minutes to import, build and join, and the job must still be running when it does.
    spec = LaunchSpec(CONF, str(tmp_path / "model"), ps=1, workers=2, max_workers=3, evaluator=True,
                      max_steps=9000, backoff_secs=0.5)
    console = Console()
    launcher = Launcher(spec, out=console)
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", launcher.run()))
    thread.start()
    try:
        _wait_for(lambda: _first_steps(launcher, "worker-1"), 120, "worker-1's first step")
        victim = next(e["pid"] for e in launcher.events if e["event"] == "start" and e["task"] == "worker-1")
        os.kill(victim, signal.SIGKILL)
        launcher.scale(3)  # a worker joins while the others train
        # What is under test is that both train before the job ends, not how fast a process starts on a
        # loaded machine: wait for that or for the job's end.
        _wait_for(lambda: len(_first_steps(launcher, "worker-1")) == 2 and _first_steps(launcher, "worker-2")
                  or not thread.is_alive(), 500, "worker-1's replacement and the added worker")
    finally:
        thread.join(timeout=500)
    assert not thread.is_alive() and result["code"] == 0, "".join(console[-60:])
    assert len(_first_steps(launcher, "worker-1")) == 2, "the job ended before worker-1's replacement trained"
    assert _first_steps(launcher, "worker-2"), "the job ended before the added worker trained"
    events = launcher.events
    death = next(e["time"] for e in events if e["event"] == "exit" and e["task"] == "worker-1")
    replacement = _first_steps(launcher, "worker-1")[1]["time"]
    print(f"worker-1: {replacement - death:.1f}s from SIGKILL to its replacement's first step")
    assert [e["code"] for e in events if e["event"] == "exit" and e["task"] == "worker-1"][0] == -signal.SIGKILL
    assert all(_gone(e["pid"]) for e in events if e["event"] == "start")
    auc = read_events(os.path.join(spec.model_dir, "eval"))["auc"]
    final_step, final_auc = auc[-1]
    print(f"final eval at step {final_step}: auc {final_auc:.4f} (single process: {SINGLE_PROCESS_AUC})")
    assert final_step >= 9000 and final_auc >= SINGLE_PROCESS_AUC - 0.02
    assert os.path.getsize(os.path.join(spec.model_dir, "logs", "worker-1.log")) > 0


def test_a_task_that_hangs_at_start_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("HANG_ROLE", "ps")
    console = Console()
    launcher = Launcher(LaunchSpec(CONF, str(tmp_path / "model"), ps=1, workers=0, start_timeout_secs=20),
                        out=console)
    assert launcher.run() == 1
    assert any("ps-0 did not start: its server never listened" in line for line in console), "".join(console)
    assert all(_gone(e["pid"]) for e in launcher.events if e["event"] == "start")


def test_a_worker_still_starting_when_the_chief_finishes_does_not_fail_the_job(tmp_path, monkeypatch):
    """Issue 15: a worker restarted near the end waited for the finished chief, and `launch` exited 1."""
    monkeypatch.setenv("HANG_ROLE", "worker")
    console = Console()
    launcher = Launcher(LaunchSpec(CONF, str(tmp_path / "model"), ps=1, workers=1, max_steps=200,
                                   start_timeout_secs=600), out=console)
    assert launcher.run() == 0, "".join(console)
    assert any("worker-0 was still starting when the chief finished" in line for line in console), "".join(console)
    assert all(_gone(e["pid"]) for e in launcher.events if e["event"] == "start")


def test_a_failure_that_would_repeat_ends_the_job_at_once(tmp_path, monkeypatch):
    """Issue 15: a reader error past max_bad_records (like a NaN loss) was retried three times per task, and the
    limit was per process; now 10 malformed lines with a limit of 5 end the whole job, with the job-wide count."""
    data = tmp_path / "data"
    data.mkdir()
    good, bad = "5.1,3.5,1.4,0.2,0\n", "5.1,oops,1.4,0.2,0\n"
    (data / "train.csv").write_text("a,b,c,d,species\n" + (good * 19 + bad) * 10)
    monkeypatch.setenv("TINY_DATA", str(data))
    monkeypatch.setenv("TINY_MAX_BAD", "5")
    monkeypatch.setenv("PYTHONPATH", ROOT)
    console = Console()
    tiny = os.path.join(ROOT, "tests", "integration", "tiny_conf.py") + ":TinyConf"
    launcher = Launcher(LaunchSpec(tiny, str(tmp_path / "model"), ps=1, workers=1), out=console)
    assert launcher.run() == 1, "".join(console)
    text = "".join(console)
    assert re.search(r"failed in a way a restart would repeat, so the job ends here: [67] malformed record\(s\) in "
                     r"'train_set' across the job, more than max_bad_records=5", text), text
    assert re.search(r"train.csv:\d+: field 'b' = 'oops'", text)
    assert not [e for e in launcher.events if e["event"] == "restart"], launcher.events
    assert all(_gone(e["pid"]) for e in launcher.events if e["event"] == "start")
    assert not (tmp_path / "model" / "export").exists()


def test_a_normal_end_reads_as_one(tmp_path):
    """One summary for the job (no role prints its own), no warning at a normal end, no export made twice."""
    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    model_dir = tmp_path / "model"
    result = subprocess.run([cli, "launch", CONF, "--workers", "1", "--evaluator", "--model-dir", str(model_dir),
                             "--max-steps", "600"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert out.count("job LaunchConf finished (exit code 0)") == 1 and out.count("finished") < 5, out[-3000:]
    assert "stopped heartbeating" not in out and " WARNING " not in out and "Traceback" not in out, out
    assert re.search(r"global step +60\d\n", out), out[-2000:]  # max_steps, or a step past it under PS races
    assert f"export (best)            {model_dir}/export/best/" in out
    origins = [json.loads((model_dir / "export" / "best" / stamp / "assets.extra" / "elastimator_origin.json")
                          .read_text())["global_step"] for stamp in os.listdir(model_dir / "export" / "best")]
    assert len(origins) == len(set(origins)), origins


def test_a_job_without_an_evaluator_exports_from_the_chief(tmp_path):
    """DLRover's ElasticJobs have parameter servers and workers only; their trainer still exported the model."""
    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    model_dir = tmp_path / "model"
    result = subprocess.run([cli, "launch", CONF, "--ps", "1", "--workers", "1", "--model-dir", str(model_dir),
                             "--max-steps", "300"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"export (best)            {model_dir}/export/best/" in result.stdout, result.stdout[-3000:]
    (stamp,) = os.listdir(model_dir / "export" / "best")
    assert (model_dir / "export" / "best" / stamp / "saved_model.pb").exists()
    assert "auc" in read_events(str(model_dir / "eval")), "the chief's final evaluation wrote no eval events"


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["ctrl-c", "sigint-ignored-by-the-shell"])
def test_ctrl_c_ends_every_process(tmp_path, sigint_ignored):
    """SIGINT to the launcher alone (not its process group) stops every process, even when the shell that
    started it ignored SIGINT (nohup, some CI shells); the chief saves a checkpoint on the way out."""
    model_dir = tmp_path / "model"
    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    launch = subprocess.Popen([cli, "launch", CONF, "--workers", "1", "--model-dir", str(model_dir),
                               "--max-steps", "100000"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=ignore)
    lines, first_batches = [], set()
    for line in launch.stdout:  # each trainer says so as it trains its first batch, not when the job ends
        lines.append(line)
        if "trained its first batch" in line:
            first_batches.add("chief" if "chief" in line.split("trained")[0] else "worker")
        if first_batches == {"chief", "worker"}:
            break
    else:
        pytest.fail("".join(lines[-40:]))
    pids = json.loads((model_dir / "launcher" / "state.json").read_text())["tasks"].values()
    assert len(pids) == 3
    launch.send_signal(signal.SIGINT)
    # Bounded by the launcher's grace for its children (30 s) plus their start-up under load.
    rest, _ = launch.communicate(timeout=180)
    assert launch.returncode == 130, rest[-3000:]
    assert "job LaunchConf was stopped (exit code 130)" in rest
    assert all(_gone(pid) for pid in pids)
    saved = [int(name[len("model.ckpt-"):-len(".index")]) for name in os.listdir(model_dir)
             if name.startswith("model.ckpt-") and name.endswith(".index")]
    assert max(saved, default=0) > 0, f"the chief saved no checkpoint on the way out: {saved}"


def test_a_conf_that_does_not_import_is_reported_once(tmp_path):
    bad = tmp_path / "bad_conf.py"
    # It defines the class asked for (read from its source first), so the import is what fails.
    bad.write_text("import not_a_module_anywhere\n\n\nclass Conf:\n    classifier_class = None\n")
    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    result = subprocess.run([cli, "launch", f"{bad}:Conf", "--workers", "2", "--model-dir", str(tmp_path / "m")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("elastimator: error:")]
    assert len(errors) == 1 and "not_a_module_anywhere" in errors[0], result.stderr[-2000:]
    assert not (tmp_path / "m" / "logs").exists()
