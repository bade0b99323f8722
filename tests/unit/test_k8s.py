"""Kubernetes manifests: the TFJob for the census job, checked against the CRD schema and core/v1 models,
submitted and scaled through the official client against a loopback HTTP endpoint that records requests."""

import http.server
import json
import urllib.parse
import threading

import pytest
from kubernetes import client

from elastimator.cluster import k8s, manifests
from elastimator.errors import ClusterError
from elastimator.estimator.contract.tf_config import parse_cluster, with_worker_slots

CENSUS = k8s.TFJobSpec(name="census", conf="examples/census/census_conf.py:CensusConf", image="registry/elastimator:1",
                       ps=1, workers=2, max_workers=4, evaluator=True, pvc="census-model")


def test_the_census_manifest_is_valid_and_complete():
    secret, policy, tfjob = k8s.manifest(CENSUS)
    assert manifests.validate(secret) == [] and manifests.validate(policy) == [] and manifests.validate(tfjob) == []
    # Only the job's own pods may reach its pods, and only on the TensorFlow and shard-service ports (gRPC and
    # the report line).
    job_pods = {"matchLabels": {"elastimator/job": "census"}}
    assert policy["spec"]["podSelector"] == job_pods and policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": job_pods}] and {p["port"] for p in rule["ports"]} == {2222, 2223, 2224}
    for replica in tfjob["spec"]["tfReplicaSpecs"].values():
        assert replica["template"]["metadata"]["labels"]["elastimator/job"] == "census"
    replicas = tfjob["spec"]["tfReplicaSpecs"]
    assert {name: r["replicas"] for name, r in replicas.items()} == {"Chief": 1, "PS": 1, "Worker": 2, "Evaluator": 1}
    chief = replicas["Chief"]["template"]["spec"]["containers"][0]
    assert chief["name"] == "tensorflow" and chief["command"][:3] == ["elastimator", "run", CENSUS.conf]
    env = {e["name"]: e for e in chief["env"]}
    assert env["ELASTIMATOR_SHARD_SERVICE"]["value"] == "census-chief-0.default.svc:2223"
    assert env["ELASTIMATOR_JOB_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "census-token", "key": "token"}
    assert len(json.loads(env["ELASTIMATOR_WORKER_SLOTS"]["value"])) == 4
    assert env["ELASTIMATOR_SHARD_SERVICE_LISTEN"]["value"] == "0.0.0.0:2223"
    assert env["ELASTIMATOR_SHARD_REPORT_PORT"]["value"] == "2224"
    assert {p["containerPort"] for p in chief["ports"]} == {2222, 2223, 2224}
    worker_env = {e["name"] for e in replicas["Worker"]["template"]["spec"]["containers"][0]["env"]}
    assert "ELASTIMATOR_SHARD_SERVICE_LISTEN" not in worker_env  # only the chief listens beyond loopback
    text = k8s.render([secret, policy, tfjob])
    assert k8s.load_text(text) == [secret, policy, tfjob]
    assert "&id" not in text and "*id" not in text  # repeated parts written out, not anchored for copying by hand


@pytest.mark.parametrize("breakage, message", [
    (lambda job: job["spec"]["tfReplicaSpecs"]["Worker"].update(replicas="two"), "'two' is not of type 'integer'"),
    (lambda job: job["spec"].pop("tfReplicaSpecs"), "'tfReplicaSpecs' is a required property"),
    (lambda job: job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(
        imagePullPolicyy="Always"), "containers.0.imagePullPolicyy: Extra inputs are not permitted"),
    (lambda job: job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0].pop("name"),
     "PS.template.spec.containers.0.name: Field required"),
    (lambda job: job["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0].update(name="main"),
     "no container named 'tensorflow'"),
    (lambda job: job["spec"]["tfReplicaSpecs"].update(Master=job["spec"]["tfReplicaSpecs"]["Chief"]),
     "unknown replica type 'Master'"),
])
def test_validation_names_what_is_wrong(breakage, message):
    _, _, tfjob = k8s.manifest(CENSUS)
    breakage(tfjob)
    problems = manifests.validate(tfjob)
    assert any(message in p for p in problems), problems
    with pytest.raises(ClusterError, match="the manifest is invalid"):
        manifests.check([tfjob])


def test_bad_names_and_counts_are_refused():
    with pytest.raises(ClusterError, match="must be a DNS label"):
        k8s.TFJobSpec(name="Census_Job", conf="c.py", image="i")
    with pytest.raises(ClusterError, match="max_workers"):
        k8s.TFJobSpec(name="census", conf="c.py", image="i", workers=3, max_workers=2)


class _Recorder(http.server.BaseHTTPRequestHandler):
    requests: list = []

    def _answer(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append((self.command, self.path, self.headers.get("Content-Type"), json.loads(body)))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PATCH = _answer

    jobs: dict = {}

    def do_GET(self):  # pylint: disable=invalid-name
        self.requests.append((self.command, self.path, None, None))
        body = json.dumps(self.jobs[self.path.rsplit("/", 1)[1]]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):  # pylint: disable=invalid-name
        self.requests.append((self.command, self.path, None, None))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"kind": "Status", "apiVersion": "v1", "status": "Success"}')

    def log_message(self, *args):
        pass


@pytest.fixture
def api_server():
    _Recorder.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
    yield client.ApiClient(configuration)
    server.shutdown()


def test_submit_and_scale_send_what_the_api_expects(api_server):
    secret, policy, tfjob = k8s.manifest(CENSUS)
    assert manifests.submit([secret, policy, tfjob], api_client=api_server) == [
        "Secret default/census-token", "NetworkPolicy default/census-job-only", "TFJob default/census"]
    _Recorder.jobs = {"census": tfjob}
    assert k8s.scale("census", 3, api_client=api_server) == "TFJob default/census: 3 worker(s); the others train on"
    (m1, p1, _, b1), (mp, pp, _, bp), (m2, p2, _, b2), (mg, pg, _, _), (m3, p3, t3, b3) = _Recorder.requests
    assert (mg, pg) == ("GET", "/apis/kubeflow.org/v1/namespaces/default/tfjobs/census")
    assert (m1, p1) == ("POST", "/api/v1/namespaces/default/secrets")
    assert (mp, pp) == ("POST", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies") and bp == policy
    assert (m2, p2) == ("POST", "/apis/kubeflow.org/v1/namespaces/default/tfjobs")
    assert (m3, p3) == ("PATCH", "/apis/kubeflow.org/v1/namespaces/default/tfjobs/census")
    assert t3 == "application/merge-patch+json" and b3 == {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": 3}}}}
    # The bodies, read back with the client's own models.
    sent_secret = api_server._ApiClient__deserialize(b1, "V1Secret")
    assert sent_secret.metadata.name == "census-token" and sent_secret.string_data["token"]
    assert b2 == tfjob
    pod = api_server._ApiClient__deserialize(b2["spec"]["tfReplicaSpecs"]["Worker"]["template"], "V1PodTemplateSpec")
    assert pod.spec.containers[0].name == "tensorflow"
    assert pod.spec.volumes[0].persistent_volume_claim.claim_name == "census-model"


def test_a_synchronous_job_has_no_ps_and_scaling_it_starts_its_trainers_again(api_server):
    spec = k8s.TFJobSpec(name="counting", conf="c.py:Conf", image="i", ps=0, workers=2, pvc="m")
    _, _, tfjob = k8s.manifest(spec)
    manifests.check([tfjob])
    assert set(tfjob["spec"]["tfReplicaSpecs"]) == {"Chief", "Worker"}
    env = {e["name"] for e in tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]}
    assert "ELASTIMATOR_WORKER_SLOTS" not in env  # a collective names only the workers that run
    with pytest.raises(ClusterError, match="a synchronous job \\(ps=0\\) has no idle worker slots"):
        k8s.TFJobSpec(name="counting", conf="c.py", image="i", ps=0, workers=2, max_workers=4)
    _Recorder.jobs = {"counting": tfjob}
    said = k8s.scale("counting", 3, api_client=api_server)
    assert said == ("TFJob default/counting: 3 worker(s); its chief and worker pods start again with them, from "
                    "the checkpoint the chief saves as it stops")
    (mg, _, _, _), (mp, _, _, patch), (md, pd, _, _) = _Recorder.requests
    assert (mg, mp, md) == ("GET", "PATCH", "DELETE") and patch == k8s.scale_patch(3)
    path, query = pd.split("?")
    assert path == "/api/v1/namespaces/default/pods"
    assert urllib.parse.parse_qs(query)["labelSelector"] == [
        "training.kubeflow.org/job-name=counting,training.kubeflow.org/replica-type in (chief,worker)"]


def test_an_invalid_manifest_is_never_sent(api_server):
    _, _, tfjob = k8s.manifest(CENSUS)
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = "many"
    with pytest.raises(ClusterError):
        manifests.submit([tfjob], api_client=api_server)
    assert _Recorder.requests == []


def test_worker_slots_widen_the_cluster_for_workers_added_later():
    tf_config = {"cluster": {"ps": ["p:1"], "chief": ["c:1"], "worker": ["w0:1"]}, "task": {"type": "ps", "index": 0}}
    widened = with_worker_slots(tf_config, json.dumps(["w0:1", "w1:1", "w2:1"]))
    assert parse_cluster(widened).cluster_spec.as_dict()["worker"] == ["w0:1", "w1:1", "w2:1"]
    with pytest.raises(Exception, match="must start with TF_CONFIG's workers"):
        with_worker_slots(tf_config, json.dumps(["other:1"]))


def test_manifest_to_a_file_says_what_it_wrote_and_what_to_do_next(tmp_path, capsys):
    from elastimator import cli  # pylint: disable=import-outside-toplevel

    out = tmp_path / "census.yaml"
    assert cli.main(["k8s", "manifest", CENSUS.conf, "--image", CENSUS.image, "--pvc", "m", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"wrote {out}: Secret, NetworkPolicy, TFJob for job census" in said
    assert f"elastimator k8s validate {out}" in said and out.read_text().startswith("apiVersion")


SYNC_CONF = '''
class Base:
    strategy = "multi_worker_mirrored"


class SyncConf(Base):
    max_steps = 100
'''


@pytest.mark.parametrize("api", ["tfjob", "jobset"])
def test_the_confs_strategy_decides_the_roles_of_the_manifest(tmp_path, capsys, api):
    """A synchronous conf got a ps replica (a cluster the job itself refuses) unless --ps 0 was given."""
    from elastimator import cli  # pylint: disable=import-outside-toplevel

    conf = tmp_path / "sync_conf.py"
    conf.write_text(SYNC_CONF)
    out = tmp_path / "sync.yaml"
    assert cli.main(["k8s", "manifest", f"{conf}:SyncConf", "--image", "i", "--workers", "2", "--api", api,
                     "--pvc", "m", "-o", str(out)]) == 0
    text = out.read_text()
    assert "PS:" not in text and "name: ps" not in text
    job = next(d for d in k8s.load(str(out)) if d["kind"] in ("TFJob", "JobSet"))
    roles = (sorted(job["spec"]["tfReplicaSpecs"]) if api == "tfjob"
             else sorted(r["name"] for r in job["spec"]["replicatedJobs"]))
    assert roles == (["Chief", "Worker"] if api == "tfjob" else ["chief", "worker"])
    capsys.readouterr()
    assert cli.main(["k8s", "manifest", f"{conf}:SyncConf", "--image", "i", "--ps", "1", "--api", api]) == 2
    assert "--ps 1 contradicts conf" in capsys.readouterr().err


def test_a_parameter_server_conf_refuses_ps_0_and_an_unreadable_conf_is_said(tmp_path, capsys):
    from elastimator import cli  # pylint: disable=import-outside-toplevel

    assert cli.main(["k8s", "manifest", CENSUS.conf, "--image", "i", "--ps", "0"]) == 2
    assert "--ps 0 makes a synchronous job, but conf" in capsys.readouterr().err
    assert cli.main(["k8s", "manifest", "/in/the/image/conf.py:Conf", "--image", "i", "--pvc", "m"]) == 0
    said = capsys.readouterr()
    assert "not readable here, so its strategy is not checked" in said.err and "PS:" in said.out


def test_a_synchronous_trainer_pod_fails_its_liveness_probe_when_it_stops_stepping(tmp_path):
    """The probe is `python -m elastimator.cluster.progress_file`: run it on progress files as a kubelet would."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel

    from elastimator.cluster import progress_file  # pylint: disable=import-outside-toplevel

    sync = k8s.TFJobSpec(name="sync", conf="c.py:C", image="i", ps=0, workers=2, pvc="m")
    job = next(d for d in k8s.manifest(sync) if d["kind"] == "TFJob")
    for replica in ("Chief", "Worker"):
        container = job["spec"]["tfReplicaSpecs"][replica]["template"]["spec"]["containers"][0]
        assert {"name": progress_file.ENV, "value": k8s.PROGRESS_PATH} in container["env"]
        probe = container["livenessProbe"]["exec"]["command"]
    assert manifests.validate(job) == []
    ps_job = next(d for d in k8s.manifest(CENSUS) if d["kind"] == "TFJob")
    assert all("livenessProbe" not in r["template"]["spec"]["containers"][0]
               for r in ps_job["spec"]["tfReplicaSpecs"].values())  # its trainers do not wait on each other

    path = str(tmp_path / "progress.json")

    def probe_exit_code():
        command = [sys.executable if word == "python" else word for word in probe[:-1]] + [path]
        return subprocess.run(command, capture_output=True, text=True, timeout=60).returncode

    assert probe_exit_code() == 0  # no step yet: starting up
    progress_file.write(path, 10)
    assert probe_exit_code() == 0  # stepping
    with open(path, "w") as f:
        json.dump({"step": 10, "time": time.time() - progress_file.STALL_SECS - 5, "ended": False}, f)
    assert probe_exit_code() == 1  # silent past the bound
    progress_file.write(path, 10, ended=True)
    assert probe_exit_code() == 0  # training is over: exporting is no stall
