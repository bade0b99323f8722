"""Autoscaling on Kubernetes: the chief's autoscaler measures steps/s from its own summaries, asks the launcher's
policy, and sets the job's Worker replicas through the API (a loopback server that records requests and applies
the merge patches); the manifest grants exactly that."""

import http.server
import json
import threading

import pytest
import tensorflow as tf
from kubernetes import client

from elastimator.cluster import jobset, k8s, k8s_autoscale, k8s_scaler, manifests
from elastimator.cluster.autoscale import ScalingLimits

SPEC = k8s.TFJobSpec(name="census", conf="c.py:C", image="i", ps=1, workers=2, max_workers=4, autoscale=True,
                     pvc="m")


def _merge(target: dict, patch: dict) -> dict:
    for key, value in patch.items():
        target[key] = _merge(dict(target.get(key, {})), value) if isinstance(value, dict) else value
    return target


class _Server(http.server.BaseHTTPRequestHandler):
    requests: list = []
    job: dict = {}

    def _reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # pylint: disable=invalid-name
        self.requests.append(("GET", self.path))
        self._reply(self.job)

    def do_PATCH(self):  # pylint: disable=invalid-name
        patch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append(("PATCH", self.path, patch))
        _merge(self.job, patch)
        self._reply(self.job)

    def log_message(self, *args):
        pass


@pytest.fixture
def api_server():
    _Server.requests = []
    _Server.job = json.loads(json.dumps(k8s.manifest(SPEC)[-1]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.server_port}"))
    server.shutdown()


def test_the_manifest_grants_the_chief_exactly_get_and_patch_on_its_own_job():
    for api, documents, group in (("tfjob", k8s.manifest(SPEC), "kubeflow.org"),
                                  ("jobset", jobset.manifest(SPEC), "jobset.x-k8s.io")):
        manifests.check(documents)
        kinds = [d["kind"] for d in documents]
        assert kinds[2:5] == ["ServiceAccount", "Role", "RoleBinding"]  # before the job, whose chief uses it
        role = documents[3]
        assert role["rules"] == [{"apiGroups": [group], "resources": [f"{api}s"], "resourceNames": ["census"],
                                  "verbs": ["get", "patch"]}]
        assert documents[4]["subjects"] == [{"kind": "ServiceAccount", "name": "census-scaler",
                                             "namespace": "default"}]
    replicas = k8s.manifest(SPEC)[-1]["spec"]["tfReplicaSpecs"]
    chief, worker = replicas["Chief"]["template"]["spec"], replicas["Worker"]["template"]["spec"]
    assert chief["serviceAccountName"] == "census-scaler" and "serviceAccountName" not in worker
    env = {e["name"]: e.get("value") for e in chief["containers"][0]["env"]}
    assert json.loads(env[k8s_autoscale.AUTOSCALE_ENV]) == {
        "api": "tfjob", "name": "census", "namespace": "default", "min_workers": 0, "max_workers": 4,
        "every_secs": 30.0}
    with pytest.raises(Exception, match="--autoscale scales a parameter-server job's workers"):
        k8s.TFJobSpec(name="c", conf="c.py", image="i", ps=0, workers=2, autoscale=True)


def test_the_chief_adds_a_worker_that_pays_and_removes_one_that_does_not(api_server, tmp_path):
    with tf.Graph().as_default():  # a v1 writer, as the chief's StepCounterHook writes its summaries
        writer = tf.compat.v1.summary.FileWriter(str(tmp_path))

    def steps_per_sec(value, step):
        writer.add_summary(tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(
            tag="global_step/sec", simple_value=value)]), step)
        writer.flush()

    settings = k8s_autoscale.Settings(api="tfjob", name="census", namespace="default", min_workers=0, max_workers=4)
    scaler = k8s_scaler.Autoscaler(settings, str(tmp_path), api_client=api_server,
                                      limits=ScalingLimits(min_workers=0, max_workers=4, cooldown_secs=60))
    assert scaler.turn(0.0) is None  # no steps/s written yet
    steps_per_sec(10.0, 100)
    assert scaler.turn(1.0).reason.startswith("holding")
    decision = scaler.turn(70.0)
    assert decision.workers == 3 and "adding a worker" in decision.reason
    patches = [r[2] for r in _Server.requests if r[0] == "PATCH"]
    assert patches == [{"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 3}}}}]
    steps_per_sec(10.2, 900)  # the third worker brought almost nothing
    assert scaler.turn(80.0).reason.startswith("holding")
    decision = scaler.turn(150.0)
    assert decision.workers == 2 and "removing it" in decision.reason
    assert [r[2] for r in _Server.requests if r[0] == "PATCH"][-1] == \
        {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}}
    assert scaler.current_workers() == 2
    writer.close()
