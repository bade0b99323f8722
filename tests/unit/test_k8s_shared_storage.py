"""A Kubernetes job of several pods must share its model_dir: `k8s manifest` refuses to write one that does not
(naming --pvc and a model_dir with a scheme), `k8s validate` calls such a manifest invalid, and `k8s convert` warns."""

import os
import subprocess
import sys

import pytest

from elastimator.cluster import k8s, shared_storage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = "examples/census/census_conf.py:CensusConf"


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT]))
    return subprocess.run([sys.executable, "-m", "elastimator.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


@pytest.mark.parametrize("api", ["tfjob", "jobset"])
def test_manifest_without_shared_storage_is_refused_with_the_fix(api, tmp_path):
    out = tmp_path / "job.yaml"
    refused = _cli("k8s", "manifest", CONF, "--image", "i", "--workers", "2", "--evaluator", "--api", api,
                   "-o", str(out))
    assert refused.returncode == 2 and not out.exists()
    assert "its pods keep model_dir /mnt/model each on its own disk" in refused.stderr
    assert "share no checkpoints" in refused.stderr and "--pvc CLAIM" in refused.stderr
    assert "gs://bucket/dir" in refused.stderr
    for shared in (["--pvc", "census-model"], ["--model-dir", "gs://bucket/census"]):
        written = _cli("k8s", "manifest", CONF, "--image", "i", "--workers", "2", "--api", api, *shared,
                       "-o", str(out))
        assert written.returncode == 0, written.stderr
        assert _cli("k8s", "validate", str(out)).returncode == 0


def test_validate_refuses_a_manifest_whose_pods_share_nothing(tmp_path):
    out = tmp_path / "job.yaml"
    assert _cli("k8s", "manifest", CONF, "--image", "i", "--pvc", "m", "-o", str(out)).returncode == 0
    text = out.read_text()
    # As a manifest written by hand or by an older elastimator: the claim and its mount taken out.
    documents = k8s.load_text(text)
    for replica in next(d for d in documents if d["kind"] == "TFJob")["spec"]["tfReplicaSpecs"].values():
        template = replica["template"]["spec"]
        del template["volumes"], template["containers"][0]["volumeMounts"]
    out.write_text(k8s.render(documents))
    invalid = _cli("k8s", "validate", str(out))
    assert invalid.returncode == 1 and "the manifest is invalid" in invalid.stderr
    assert "no volume mounted there in " in invalid.stderr


def test_a_single_pod_and_any_volume_mounted_above_model_dir_count_as_shared():
    alone = k8s.manifest(k8s.TFJobSpec(name="alone", conf="c.py", image="i", ps=0, workers=0))
    assert shared_storage.problems(alone)  # a Worker replica of 0 pods is there to scale
    del alone[-1]["spec"]["tfReplicaSpecs"]["Worker"]
    assert shared_storage.problems(alone) == []  # the chief alone
    documents = k8s.manifest(k8s.TFJobSpec(name="nfs", conf="c.py", image="i", model_dir="/shared/jobs/nfs"))
    for replica in documents[-1]["spec"]["tfReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["volumeMounts"] = [{"name": "nfs", "mountPath": "/shared/"}]
    assert shared_storage.problems(documents) == []
