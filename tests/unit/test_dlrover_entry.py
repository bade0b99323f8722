"""DLRover's trainer entry command (`python -m dlrover.trainer.entry.local_entry ...`) behind
`python -m elastimator.compat -m`: its flags as elastimator's command line."""

import pytest

from elastimator.dlrover_entry import ENTRY_MODULES, plan
from elastimator.errors import ConfError


def test_the_kubernetes_platform_runs_this_task_of_the_cluster():
    # autoscale_job.yaml's command: each pod is one task; the manifest decides the scaling.
    assert plan(["--platform=Kubernetes", "--conf=train_conf.TrainConf", "--enable_auto_scaling=True"]) == (
        ["run", "train_conf.TrainConf", "--no-progress"], [])
    assert plan(["--conf=train_conf.TrainConf"])[0][0] == "run"  # DLRover's default platform


def test_the_local_platforms_launch_the_whole_job_with_worker_0_as_chief():
    # run.sh's command: 1 ps and 2 workers, DLRover's worker 0 being the chief.
    assert plan(["--platform=local_kubernetes", "--conf=train_conf.TrainConf", "--ps_num=1", "--worker_num=2"]) == (
        ["launch", "train_conf.TrainConf", "--ps", "1", "--workers", "1", "--evaluator"], [])
    command, _ = plan(["--platform=local", "--conf=c.C", "--worker_num", "1", "--evaluator_num=0",
                       "--enable_auto_scaling=True"])
    assert command == ["launch", "c.C", "--ps", "1", "--workers", "0", "--autoscale"]
    # DLRover parsed it with type=bool, so "False" meant True there; here it means False.
    assert "--autoscale" not in plan(["--platform=local", "--conf=c.C", "--enable_auto_scaling=False"])[0]


def test_flags_without_a_counterpart_are_named_and_wrong_ones_refused():
    _, unknown = plan(["--conf=c.C", "--worker_action=run", "--mock=1"])
    assert unknown == ["--worker_action=run", "--mock=1"]
    with pytest.raises(ConfError, match="--platform=ray: elastimator runs DLRover's 'Kubernetes'"):
        plan(["--platform=ray", "--conf=c.C"])
    with pytest.raises(ConfError, match="worker 0 is the chief"):
        plan(["--platform=local", "--conf=c.C", "--worker_num=0"])
    assert "dlrover.trainer.entry.local_entry" in ENTRY_MODULES
