"""`k8s rehearse`'s pure parts: the pods a TFJob or JobSet becomes (names, DNS names, TF_CONFIG, environment), their
volumes, the wiring check and the controllers' restart/success/failure rules, driven exit by exit."""

import copy
import json

import pytest

from elastimator.cluster import jobset, k8s, rehearsal_wiring
from elastimator.cluster.rehearsal_controller import Controller, Done, Restart, RestartAll
from elastimator.cluster.rehearsal_pods import expand, workload
from elastimator.cluster.rehearsal_volumes import binds
from elastimator.errors import ClusterError


def _spec(**fields):
    return k8s.TFJobSpec(**{"name": "census", "conf": "examples/census/census_conf.py:CensusConf", "image": "img",
                            "ps": 1, "workers": 2, "evaluator": True, "pvc": "model", **fields})


def _env(pod):
    return pod.env_dict()


def test_a_tfjobs_pods_get_the_operators_names_and_tf_config():
    job = workload(k8s.manifest(_spec()))
    pods = {p.name: p for p in job.pods}
    assert sorted(pods) == ["census-chief-0", "census-evaluator-0", "census-ps-0", "census-worker-0",
                            "census-worker-1"]
    config = json.loads(_env(pods["census-worker-1"])["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"] == {"chief": ["census-chief-0.default.svc:2222"], "ps": ["census-ps-0.default.svc:2222"],
                                 "worker": ["census-worker-0.default.svc:2222", "census-worker-1.default.svc:2222"]}
    assert json.loads(_env(pods["census-evaluator-0"])["TF_CONFIG"])["task"] == {"type": "evaluator", "index": 0}
    worker = pods["census-worker-1"]
    assert worker.hostname == "census-worker-1" and "census-worker-1.default.svc" in worker.dns_names
    assert _env(worker)["HOSTNAME"] == "census-worker-1"
    assert len(_env(worker)["ELASTIMATOR_JOB_TOKEN"]) == 32  # from the manifest's Secret
    assert worker.command[:3] == ("elastimator", "run", "examples/census/census_conf.py:CensusConf")
    assert worker.working_dir == "/job" and worker.restart_policy == "ExitCode"


def test_a_tfjobs_port_is_its_tfjob_port():
    documents = k8s.manifest(_spec())
    ports = documents[-1]["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"]
    ports[0]["containerPort"] = 2300
    config = json.loads(_env(workload(documents).pods[0])["TF_CONFIG"])
    assert config["cluster"]["ps"] == ["census-ps-0.default.svc:2300"]


def test_a_jobsets_pods_get_hostnames_indexes_and_labels_and_derive_their_tf_config():
    job = workload(jobset.manifest(_spec()))
    pods = {p.name: p for p in job.pods}
    worker = pods["census-worker-0-1"]
    assert "census-worker-0-1.census" in worker.dns_names
    assert "census-worker-0-1.census.default.svc.cluster.local" in worker.dns_names
    env = _env(worker)
    assert (env["JOB_COMPLETION_INDEX"], env["REPLICATED_JOB_NAME"], env["JOBSET_NAME"], env["JOBSET_JOB_INDEX"]) == (
        "1", "worker", "census", "0")
    config = rehearsal_wiring.tf_config(worker)
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"]["ps"] == ["census-ps-0-0.census:2222"]


def test_expansion_follows_kubernetes():
    assert expand("$(A)-$(B)-$$(A)", {"A": "x"}) == "x-$(B)-$(A)"


def test_a_claim_is_shared_and_an_emptydir_or_own_disk_is_per_pod(tmp_path):
    shared = workload(k8s.manifest(_spec())).pods
    first, second = (binds(p, str(tmp_path), {}) for p in shared[:2])
    model = [b for b in first if b.path == "/mnt/model"][0]
    assert model.shared_by == "claim model" and model.source == [b for b in second if b.path == "/mnt/model"][0].source
    documents = k8s.manifest(_spec(pvc=None))
    alone = workload(documents).pods
    first, second = (binds(p, str(tmp_path), {}) for p in alone[:2])
    assert [b.source for b in first if b.path == "/mnt/model"] != [b.source for b in second if b.path == "/mnt/model"]
    # a new pod (ExitCode's restart, a JobSet's) gets a new disk
    assert binds(alone[0], str(tmp_path), {}, 1)[0].source != first[0].source


def test_the_wiring_of_a_written_manifest_holds_and_a_broken_port_or_name_is_named():
    documents = k8s.manifest(_spec())
    assert rehearsal_wiring.problems(workload(documents).pods) == []
    assert rehearsal_wiring.problems(workload(jobset.manifest(_spec())).pods) == []
    broken = copy.deepcopy(documents)
    env = broken[-1]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    next(e for e in env if e["name"] == "ELASTIMATOR_SHARD_SERVICE")["value"] = "census-chief-0.default.svc:2299"
    problems = rehearsal_wiring.problems(workload(broken).pods)
    assert len(problems) == 2 and problems[0].startswith("pod census-worker-0: ELASTIMATOR_SHARD_SERVICE names "
                                                         "census-chief-0.default.svc:2299")
    assert "listens on 2222, 2223, 2224, not 2299" in problems[0]
    next(e for e in env if e["name"] == "ELASTIMATOR_SHARD_SERVICE")["value"] = "census-chief-0.prod.svc:2223"
    problems = rehearsal_wiring.problems(workload(broken).pods)
    assert "no pod of the job has the name census-chief-0.prod.svc" in problems[0]


def test_a_secret_missing_from_the_manifest_is_named():
    documents = k8s.manifest(_spec())[1:]
    with pytest.raises(ClusterError, match="Secret default/census-token key 'token' is not in the manifest"):
        workload(documents)


def test_tfjob_restarts_on_failure_and_succeeds_with_its_chief():
    controller = Controller(workload(k8s.manifest(_spec())))
    assert controller.exited("census-worker-0", 137) == [Restart("census-worker-0", True,
                                                                  "exit code 137, restartPolicy ExitCode")]
    assert controller.exited("census-worker-0", 0) == []
    assert controller.exited("census-chief-0", 0)[0].succeeded


def test_tfjob_backoff_limit_and_exit_code_policy():
    documents = k8s.manifest(_spec(max_restarts=1))
    documents[-1]["spec"]["runPolicy"]["backoffLimit"] = 1
    for replica in documents[-1]["spec"]["tfReplicaSpecs"].values():
        replica["restartPolicy"] = "OnFailure"
    controller = Controller(workload(documents))
    assert isinstance(controller.exited("census-ps-0", 1)[0], Restart)
    done = controller.exited("census-ps-0", 1)[0]
    assert not done.succeeded and "backoffLimit 1" in done.reason
    for replica in documents[-1]["spec"]["tfReplicaSpecs"].values():
        replica["restartPolicy"] = "ExitCode"
    controller = Controller(workload(documents))
    assert controller.exited("census-worker-1", 143)[0].new_pod
    assert "not retryable" in controller.exited("census-worker-1", 2)[0].reason


def test_tfjob_without_a_chief_succeeds_with_worker_0_or_all_workers():
    documents = k8s.manifest(_spec())
    del documents[-1]["spec"]["tfReplicaSpecs"]["Chief"]
    assert Controller(workload(documents)).exited("census-worker-0", 0)[0].succeeded
    documents[-1]["spec"]["successPolicy"] = "AllWorkers"
    controller = Controller(workload(documents))
    assert controller.exited("census-worker-0", 0) == []
    assert controller.exited("census-worker-1", 0)[0].succeeded


def test_jobset_restarts_in_place_then_restarts_the_jobset_then_fails():
    documents = jobset.manifest(_spec(max_restarts=1))  # worker Job backoffLimit 2, maxRestarts 1
    for replicated in documents[-1]["spec"]["replicatedJobs"]:  # the Job's own counting, without its rules
        del replicated["template"]["spec"]["podFailurePolicy"]
    controller = Controller(workload(documents))
    assert isinstance(controller.exited("census-worker-0-0", 1)[0], Restart)
    assert isinstance(controller.exited("census-worker-0-1", 1)[0], Restart)
    restart = controller.exited("census-worker-0-0", 1)[0]
    assert isinstance(restart, RestartAll) and "restart 1 of failurePolicy.maxRestarts 1" in restart.reason
    assert controller.generations()["census-ps-0-0"] == 1  # every pod anew
    for _ in range(2):
        controller.exited("census-worker-0-0", 1)
    done = controller.exited("census-worker-0-0", 1)[0]
    assert isinstance(done, Done) and not done.succeeded


def test_jobset_success_policy_waits_for_its_targets():
    controller = Controller(workload(jobset.manifest(_spec())))  # All of chief, evaluator
    assert controller.exited("census-chief-0-0", 0) == []
    assert controller.exited("census-evaluator-0-0", 0)[0].succeeded


def test_the_pythons_directories_a_pods_mount_would_hide_are_named_once():
    from elastimator.cluster.rehearsal import hidden_by, python_paths

    paths = python_paths()
    assert paths and all(not a.startswith(b + "/") for a in paths for b in paths)
    assert hidden_by(["/tmp", "/mnt/model"], ["/tmp/ci/main/.venv", "/tmp/ci/main/src", "/usr/lib/python3",
                                              "/mnt/modelling"]) == ["/tmp/ci/main/.venv", "/tmp/ci/main/src"]
