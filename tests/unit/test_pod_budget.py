"""The restart budget on Kubernetes: each pod's start counted in the model_dir (cluster/pod_budget.py), `elastimator
run`'s exit codes in a pod, and manifests whose restart policies agree (ExitCode; a Job's podFailurePolicy and
the JobSet's failurePolicy rules), driven through the rehearsal's controller exit by exit."""

import json
import os
import subprocess
import sys

import pytest

from elastimator.cluster import elastic_job, jobset, k8s, manifests, pod_budget
from elastimator.cluster.pod_budget import OutOfRestarts, StartRecord, next_start, over_budget, record_start
from elastimator.cluster.rehearsal_controller import Controller, Done, Restart
from elastimator.cluster.rehearsal_pods import workload
from elastimator.errors import OUT_OF_RESTARTS_EXIT, RETRY_EXIT, ClusterError


def _spec(**fields):
    return k8s.TFJobSpec(**{"name": "census", "conf": "examples/census/census_conf.py:CensusConf", "image": "img",
                            "ps": 1, "workers": 2, "pvc": "model", **fields})


# --- the rule, pure -------------------------------------------------------------------------------------------

def test_starts_without_progress_are_strikes_and_a_newer_checkpoint_gives_them_back():
    first = next_start(None, None, "job")
    assert first == StartRecord(None, 0, "job")
    second = next_start(first, None, "job")  # no checkpoint yet, again: a strike
    third = next_start(second, 100, "job")  # a first checkpoint since: progress
    fourth = next_start(third, 100, "job")
    fifth = next_start(fourth, 100, "job")
    sixth = next_start(fifth, 250, "job")
    assert [r.strikes for r in (first, second, third, fourth, fifth, sixth)] == [0, 1, 0, 1, 2, 0]
    assert sixth.checkpoint_step == 250


def test_a_trainers_progress_needs_a_step_of_its_own_as_under_launch():
    crashed = next_start(StartRecord(100, 2, "job"), 300, "job", trainer=True)  # the others trained; it did not
    assert crashed.strikes == 3
    stepped = next_start(StartRecord(100, 2, "job", stepped=True), 300, "job", trainer=True)
    assert stepped.strikes == 0 and not stepped.stepped
    assert next_start(StartRecord(100, 2, "job"), 300, "job", trainer=False).strikes == 0  # a ps, an evaluator


def test_a_record_of_another_submission_counts_from_zero():
    assert next_start(StartRecord(100, 7, "old"), 100, "new") == StartRecord(100, 0, "new")


def test_the_budget_allows_max_restarts_restarts_without_progress():
    records = [next_start(None, 5, "job")]
    for _ in range(4):
        records.append(next_start(records[-1], 5, "job"))
    assert [over_budget(r, 3) for r in records] == [False, False, False, False, True]  # the 4th restart is refused


def test_a_bad_budget_says_what_was_expected():
    assert pod_budget.max_strikes({}) is None
    assert pod_budget.max_strikes({pod_budget.ENV: "3"}) == 3
    with pytest.raises(ClusterError, match=r"ELASTIMATOR_MAX_STRIKES must be a whole number .* got 'x'"):
        pod_budget.max_strikes({pod_budget.ENV: "x"})


# --- the record in the model_dir --------------------------------------------------------------------------------

def test_record_start_writes_the_record_and_refuses_past_the_budget(tmp_path):
    env = {pod_budget.TOKEN_ENV: "secret"}
    for strikes in range(3):
        assert record_start(str(tmp_path), "worker-0", 40, 2, env).strikes == strikes
    with pytest.raises(OutOfRestarts) as refused:
        record_start(str(tmp_path), "worker-0", 40, 2, env)
    message = str(refused.value)
    assert "worker-0 was restarted 3 time(s) with no progress between them" in message
    assert "write the manifest again with `elastimator k8s manifest`" in message
    assert "the checkpoint of step 40" in message and "budget of 2" in message
    assert str(tmp_path / "restarts" / "worker-0.json") in message  # what to delete to start over
    saved = json.loads((tmp_path / "restarts" / "worker-0.json").read_text())
    assert saved["strikes"] == 3 and saved["checkpoint_step"] == 40 and "secret" not in json.dumps(saved)
    with pytest.raises(OutOfRestarts):  # a newer checkpoint, but the worker's own process trained no step
        record_start(str(tmp_path), "worker-0", 41, 2, env)
    pod_budget.mark_stepped(str(tmp_path), "worker-0")
    assert record_start(str(tmp_path), "worker-0", 42, 2, env).strikes == 0  # progress: back to 0
    assert record_start(str(tmp_path), "ps-0", None, 2, env).strikes == 0
    assert record_start(str(tmp_path), "ps-0", 42, 2, env).strikes == 0  # a ps needs no step of its own
    assert not (tmp_path / "restarts" / "worker-0.json.tmp").exists()


def test_elastimator_run_in_a_pod_past_its_budget_exits_with_the_permanent_code(tmp_path):
    conf = tmp_path / "conf.py"
    conf.write_text("class Conf:\n    classifier_class = None\n\nraise SystemExit('not read past the budget')\n")
    (tmp_path / "model" / "restarts").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", ""), ELASTIMATOR_MAX_STRIKES="1",
               ELASTIMATOR_JOB_TOKEN="t", TF_CONFIG=json.dumps({"cluster": {"chief": ["c:1"]},
                                                                 "task": {"type": "chief", "index": 0}}))
    record = StartRecord(None, 1, pod_budget.job_digest(env))
    (tmp_path / "model" / "restarts" / "chief-0.json").write_text(json.dumps(record.to_dict()))
    run = subprocess.run([sys.executable, "-m", "elastimator.cli", "run", f"{conf}:Conf", "--model-dir",
                          str(tmp_path / "model")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == OUT_OF_RESTARTS_EXIT, run.stderr
    assert "chief-0 was restarted 2 time(s) with no progress between them" in run.stderr


def test_elastimator_run_in_a_pod_says_restart_me_for_an_error_a_restart_may_cure(tmp_path):
    (tmp_path / "model").write_text("a file where the model_dir should be")
    runs = {}
    for budget in ("3", ""):
        env = dict(os.environ, ELASTIMATOR_MAX_STRIKES=budget,
                   TF_CONFIG=json.dumps({"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0}}))
        runs[budget] = subprocess.run([sys.executable, "-m", "elastimator.cli", "run",
                                       "tests/integration/counting_conf.py:CountingConf", "--model-dir",
                                       str(tmp_path / "model")], env=env, capture_output=True, text=True, timeout=300)
    assert runs["3"].returncode == RETRY_EXIT, runs["3"].stderr  # 128 + SIGUSR1: the operator restarts it
    assert runs[""].returncode not in (RETRY_EXIT, 0), runs[""].stderr  # outside a pod with a budget, as before
    assert 1 <= OUT_OF_RESTARTS_EXIT <= 127


# --- the manifests ---------------------------------------------------------------------------------------------

def _env(template):
    return {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}


def test_a_tfjob_restarts_on_kills_fails_on_permanent_exits_and_has_no_lifetime_limit():
    documents = k8s.manifest(_spec(max_restarts=5))
    tfjob = documents[-1]
    assert "backoffLimit" not in tfjob["spec"]["runPolicy"]
    for replica in tfjob["spec"]["tfReplicaSpecs"].values():
        assert replica["restartPolicy"] == "ExitCode"
        assert _env(replica["template"])[pod_budget.ENV] == "5"
    assert not [p for d in documents for p in manifests.validate(d)]
    controller = Controller(workload(documents))
    for _ in range(20):  # any number of kills: the pods' budget, not the operator, counts them
        assert isinstance(controller.exited("census-worker-0", 137)[0], Restart)
        assert isinstance(controller.exited("census-worker-0", RETRY_EXIT)[0], Restart)
    done = controller.exited("census-worker-0", OUT_OF_RESTARTS_EXIT)[0]
    assert isinstance(done, Done) and not done.succeeded and "exit code 4" in done.reason


def test_a_jobsets_pods_are_replaced_uncounted_until_a_permanent_exit_fails_the_jobset():
    documents = jobset.manifest(_spec(max_restarts=2))
    job = documents[-1]
    assert job["spec"]["failurePolicy"]["rules"][0] == {"name": "permanent-exit", "action": "FailJobSet",
                                                        "onJobFailureReasons": ["PodFailurePolicy"]}
    for replicated in job["spec"]["replicatedJobs"]:
        spec = replicated["template"]["spec"]
        assert spec["template"]["spec"]["restartPolicy"] == "Never"
        # 126, 127: the shell's exits for a command the image cannot run
        assert spec["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == [2, 3, 4, 126, 127]
        assert _env(spec["template"])[pod_budget.ENV] == "2"
    assert not [p for d in documents for p in manifests.validate(d)]
    controller = Controller(workload(documents))
    for _ in range(20):  # far past the worker Job's backoffLimit (4): Ignore rules do not count
        restart = controller.exited("census-worker-0-0", 137)[0]
        assert isinstance(restart, Restart) and restart.new_pod and "Ignore" in restart.reason
        assert isinstance(controller.exited("census-worker-0-1", RETRY_EXIT)[0], Restart)
    missing = Controller(workload(documents)).exited("census-worker-0-0", 127)[0]  # not found in the image
    assert isinstance(missing, Done) and not missing.succeeded
    done = controller.exited("census-worker-0-0", OUT_OF_RESTARTS_EXIT)[0]
    assert isinstance(done, Done) and not done.succeeded
    assert "FailJob rule of its podFailurePolicy" in done.reason and "'permanent-exit' fails the JobSet" in done.reason
    assert controller.jobset_restarts == 0


def _elastic_job(command):
    return {"apiVersion": "elastic.iml.github.io/v1alpha1", "kind": "ElasticJob", "metadata": {"name": "deepctr"},
            "spec": {"distributionStrategy": "ParameterServerStrategy", "replicaSpecs": {
                role: {"replicas": 1, "restartCount": 4, "template": {"spec": {"containers": [
                    {"name": "main", "image": "img", "command": command}]}}} for role in ("ps", "worker")}}}


@pytest.mark.parametrize("api", ["tfjob", "jobset"])
def test_a_converted_elastic_job_running_dlrovers_command_counts_restarts_over_its_life(api):
    conversion = elastic_job.convert(_elastic_job(["/bin/sh", "-c", "python -m model_zoo.train --conf=c.Conf"]), api)
    job = conversion.documents[-1]
    assert any("restartCount 4: the pods run DLRover's own command" in note for note in conversion.notes)
    if api == "tfjob":
        assert job["spec"]["runPolicy"]["backoffLimit"] == 4
        assert {r["restartPolicy"] for r in job["spec"]["tfReplicaSpecs"].values()} == {"OnFailure"}
        templates = [r["template"] for r in job["spec"]["tfReplicaSpecs"].values()]
    else:
        assert job["spec"]["failurePolicy"] == {"maxRestarts": 4}
        templates = [r["template"]["spec"]["template"] for r in job["spec"]["replicatedJobs"]]
        assert not any("podFailurePolicy" in r["template"]["spec"] for r in job["spec"]["replicatedJobs"])
    if api == "jobset":
        assert all(t["spec"]["restartPolicy"] == "OnFailure" for t in templates)
    assert not any(pod_budget.ENV in _env(t) for t in templates)
    assert not [p for d in conversion.documents for p in manifests.validate(d)]
