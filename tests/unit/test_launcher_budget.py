"""The launcher's shell feeds the restart budget: a new checkpoint in the model_dir becomes `Checkpointed`, a
trainer's progress file `Stepped`, and a chief killed more often than max_restarts, with progress between, is
restarted every time (fake processes and a fake clock; the rule itself is in test_restart_budget.py)."""

import json

from tests.unit.test_launcher_shell import FakeCluster, launch, wait_for


def _progress(launcher) -> list[dict]:
    return [e for e in launcher.events if e["event"] == "progress"]


def test_a_checkpoint_after_a_restart_gives_the_budget_back(tmp_path):
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1, max_restarts=1)
    model_dir = tmp_path / "model"
    wait_for(lambda: any(e["event"] == "up" and e["task"] == "chief-0" for e in launcher.events), "chief-0 up")
    for fault in range(3):
        cluster.latest("chief-0").code = -9
        wait_for(lambda: cluster.starts("chief-0") == fault + 2 or not thread.is_alive(), f"restart {fault + 1}")
        assert thread.is_alive(), "".join(console)
        with open(model_dir / "logs" / "chief-0.progress.json", "w") as f:
            json.dump({"step": 50, "time": 0}, f)
        (model_dir / f"model.ckpt-{40 * (fault + 1)}.index").write_text("")
        wait_for(lambda: len(_progress(launcher)) == fault + 1, f"the progress after restart {fault + 1}")
    assert [e["step"] for e in _progress(launcher)] == [40, 80, 120]
    assert [e["refilled"] for e in _progress(launcher)] == [["chief-0"]] * 3
    assert launcher.strikes() == {} and launcher.restarts() == {"chief-0": 3}
    cluster.latest("chief-0").code = 0
    cluster.latest("worker-0").code = 0
    thread.join(timeout=10)
    assert result == {"code": 0}, "".join(console)
    assert sum("restarts count from 0 again" in line for line in console) == 3


def test_without_progress_the_second_death_ends_the_job(tmp_path):
    cluster = FakeCluster()
    launcher, console, thread, result = launch(tmp_path, cluster, ps=1, workers=1, max_restarts=1)
    wait_for(lambda: any(e["event"] == "up" and e["task"] == "chief-0" for e in launcher.events), "chief-0 up")
    cluster.latest("chief-0").code = -9
    wait_for(lambda: cluster.starts("chief-0") == 2, "the restart")
    assert launcher.strikes() == {"chief-0": 1}
    cluster.latest("chief-0").code = 1
    thread.join(timeout=10)
    assert result == {"code": 1}, "".join(console)
    assert any("chief-0 exited with code 1 and was already restarted 1 time(s) with no progress between them"
               in line for line in console)
