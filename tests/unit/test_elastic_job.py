"""`elastimator k8s convert`: DLRover's ElasticJob YAMLs as elastimator's manifest, each field kept or named."""

import pytest
import yaml

from elastimator.cluster import elastic_job, k8s, manifests
from elastimator.errors import ClusterError
from tests.helpers import DLROVER_EXAMPLES

ENTRY = ("cd ./examples/tensorflow/criteo_deeprec && python -m dlrover.trainer.entry.local_entry "
         "--platform=Kubernetes --conf=train_conf.TrainConf --enable_auto_scaling=True")


def _role(command, **container):
    return {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "registry/deepctr:2", "imagePullPolicy": "Always",
         "command": ["/bin/bash", "-c", command], **container}],
        "volumes": [{"name": "pvc-nas", "persistentVolumeClaim": {"claimName": "pvc-nas"}}]}}}


JOB = {"apiVersion": "elastic.iml.github.io/v1alpha1", "kind": "ElasticJob",
       "metadata": {"name": "deepctr", "namespace": "dlrover"},
       "spec": {"distributionStrategy": "ParameterServerStrategy", "resourceLimits": {"cpu": "15"},
                "replicaSpecs": {
                    "ps": {"replicas": 2, **_role(ENTRY, resources={"requests": {"cpu": "2", "memory": "3Gi"}})},
                    "worker": {"replicas": 3, **_role(ENTRY, env=[{"name": "MY_FLAG", "value": "1"}],
                                                      volumeMounts=[{"name": "pvc-nas", "mountPath": "/nas"}])},
                    "evaluator": {"replicas": 1, **_role(ENTRY)},
                    "dlrover-master": {"template": {"spec": {"containers": [{"name": "main"}]}}}}}}


@pytest.mark.parametrize("api", ["tfjob", "jobset"])
def test_an_elastic_job_converts_keeping_counts_images_resources_volumes_env_and_command(api):
    conversion = elastic_job.convert(JOB, api)
    manifests.check(conversion.documents)
    _, _, job = conversion.documents
    if api == "tfjob":
        replicas = job["spec"]["tfReplicaSpecs"]
        counts = {role: r["replicas"] for role, r in replicas.items()}
        assert counts == {"Chief": 1, "PS": 2, "Worker": 2, "Evaluator": 1}  # DLRover's worker 0: the Chief
        worker, ps = replicas["Worker"]["template"]["spec"], replicas["PS"]["template"]["spec"]
    else:
        replicas = {r["name"]: r["template"]["spec"] for r in job["spec"]["replicatedJobs"]}
        assert {role: r["parallelism"] for role, r in replicas.items()} == \
            {"ps": 2, "chief": 1, "worker": 2, "evaluator": 1}
        worker, ps = replicas["worker"]["template"]["spec"], replicas["ps"]["template"]["spec"]
    assert job["metadata"]["namespace"] == "dlrover" and job["metadata"]["name"] == "deepctr"
    container = worker["containers"][0]
    assert container["image"] == "registry/deepctr:2" and container["imagePullPolicy"] == "Always"
    assert container["command"][2] == ENTRY.replace("python -m dlrover", "python -m elastimator.compat -m dlrover")
    assert container["volumeMounts"] == [{"name": "pvc-nas", "mountPath": "/nas"}]
    assert worker["volumes"] == [{"name": "pvc-nas", "persistentVolumeClaim": {"claimName": "pvc-nas"}}]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MY_FLAG"] == "1" and "ELASTIMATOR_SHARD_SERVICE" in env  # theirs beside elastimator's
    assert ps["containers"][0]["resources"] == {"requests": {"cpu": "2", "memory": "3Gi"}}
    notes = "\n".join(conversion.notes)
    for named in ("replicaSpecs.dlrover-master", "spec.resourceLimits", "restartPolicy Never",
                  "DLRover's worker 0 being the chief"):
        assert named in notes


def test_autoscaled_roles_scripts_and_synchronous_jobs():
    job = {**JOB, "spec": {"distributionStrategy": "AllreduceStrategy", "replicaSpecs": {
        "worker": {"autoScale": True, **_role("python -m examples.tensorflow.iris_dnn_elastic")}}}}
    conversion = elastic_job.convert(job)
    replicas = conversion.documents[2]["spec"]["tfReplicaSpecs"]
    # One worker, DLRover's chief, no ps (synchronous); the Worker replica stays, at 0, for `k8s scale`.
    assert {role: r["replicas"] for role, r in replicas.items()} == {"Chief": 1, "Worker": 0}
    assert replicas["Chief"]["template"]["spec"]["containers"][0]["command"][2] == \
        "python -m elastimator.compat -m examples.tensorflow.iris_dnn_elastic"
    assert any("autoScale without replicas" in note for note in conversion.notes)
    assert elastic_job._command(["python3 train.py --x"]) == ["python3 -m elastimator.compat train.py --x"]  # pylint: disable=protected-access
    with pytest.raises(ClusterError, match="expected a DLRover ElasticJob"):
        elastic_job.convert({"apiVersion": "kubeflow.org/v1", "kind": "TFJob"})


@pytest.mark.skipif(not DLROVER_EXAMPLES.is_dir(), reason="DLRover's examples are not beside the checkout")
@pytest.mark.parametrize("example", ["criteo_deeprec/manual_job.yaml", "criteo_deeprec/autoscale_job.yaml",
                                     "iris/autoscale_job.yaml"])
def test_dlrovers_own_job_yamls_convert_and_validate(example, tmp_path, capsys):
    from elastimator import cli  # pylint: disable=import-outside-toplevel

    out = tmp_path / "job.yaml"
    for api in ("tfjob", "jobset"):
        assert cli.main(["k8s", "convert", str(DLROVER_EXAMPLES / example), "--api", api, "-o", str(out)]) == 0
        said = capsys.readouterr()
        assert "note: replicaSpecs.dlrover-master: not needed" in said.err
        assert cli.main(["k8s", "validate", str(out)]) == 0
        assert [d["kind"] for d in yaml.safe_load_all(out.read_text())][0] == "Secret"
