"""Kubernetes without the Kubeflow operator: the census job as a JobSet, checked against JobSet's CRD schema and
the batch/v1 models; each pod's TF_CONFIG derived from what JobSet and the Job controller give it; submitted and
scaled through the official client against a loopback HTTP endpoint that records requests and keeps objects."""

import http.server
import json
import threading

import pytest
from kubernetes import client

from elastimator.cluster import jobset, k8s, manifests
from elastimator.errors import ClusterError
from elastimator.estimator.contract.tf_config import parse_cluster

CENSUS = k8s.TFJobSpec(name="census", conf="examples/census/census_conf.py:CensusConf", image="registry/elastimator:1",
                       ps=1, workers=2, max_workers=4, evaluator=True, pvc="census-model")
SYNC = k8s.TFJobSpec(name="counting", conf="c.py:Conf", image="i", ps=0, workers=2, pvc="m")


def _replicated(document) -> dict:
    return {r["name"]: r for r in document["spec"]["replicatedJobs"]}


def _env(replicated_job) -> dict:
    container = replicated_job["template"]["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def _pod_env(document, role: str, index: int, **overrides) -> dict:
    """What a pod of `role` sees: its template's literal values, the downward API's JobSet labels, and the
    completion index the Job controller sets."""
    literal = {k: v for k, v in _env(_replicated(document)[role]).items() if isinstance(v, str)}
    return {**literal, "JOBSET_NAME": document["metadata"]["name"], "REPLICATED_JOB_NAME": role,
            "JOBSET_JOB_INDEX": "0", "JOB_COMPLETION_INDEX": str(index), **overrides}


def test_the_census_jobset_is_valid_with_one_indexed_job_per_role():
    secret, policy, document = jobset.manifest(CENSUS)
    assert [d["kind"] for d in (secret, policy, document)] == ["Secret", "NetworkPolicy", "JobSet"]
    manifests.check([secret, policy, document])
    roles = _replicated(document)
    assert list(roles) == ["ps", "chief", "worker", "evaluator"]
    assert {name: (r["replicas"], r["template"]["spec"]["parallelism"], r["template"]["spec"]["completionMode"])
            for name, r in roles.items()} == {"ps": (1, 1, "Indexed"), "chief": (1, 1, "Indexed"),
                                              "worker": (1, 2, "Indexed"), "evaluator": (1, 1, "Indexed")}
    assert document["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True,
                                           "subdomain": "census"}
    # Done when the chief and the evaluator are (the parameter servers serve until they are stopped).
    assert document["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["chief", "evaluator"]}
    env = _env(roles["worker"])
    assert env["ELASTIMATOR_SHARD_SERVICE"] == "census-chief-0-0.census:2223"
    assert json.loads(env["ELASTIMATOR_JOBSET_ROLES"]) == {"ps": 1, "chief": 1, "worker": 4}  # worker slots
    assert env["REPLICATED_JOB_NAME"] == {"fieldRef": {
        "fieldPath": "metadata.labels['jobset.sigs.k8s.io/replicatedjob-name']"}}
    assert "ELASTIMATOR_SHARD_SERVICE_LISTEN" in _env(roles["chief"])


def test_every_role_derives_its_tf_config_and_a_restarted_pod_the_same_one():
    _, _, document = jobset.manifest(CENSUS)
    cluster = {"ps": ["census-ps-0-0.census:2222"], "chief": ["census-chief-0-0.census:2222"],
               "worker": [f"census-worker-0-{i}.census:2222" for i in range(4)]}
    for role, index in (("ps", 0), ("chief", 0), ("worker", 0), ("worker", 1), ("evaluator", 0)):
        derived = jobset.tf_config_from_env(_pod_env(document, role, index))
        assert derived == {"cluster": cluster, "task": {"type": role, "index": index}}
        parsed = parse_cluster(derived)
        assert (parsed.task_type, parsed.task_id) == (role, index)
    # A pod restarted in place, or recreated by a JobSet restart, has the same names and indexes.
    restarted = _pod_env(document, "worker", 1, **{"RESTART_ATTEMPT": "2"})
    assert jobset.tf_config_from_env(restarted) == jobset.tf_config_from_env(_pod_env(document, "worker", 1))
    assert jobset.tf_config_from_env({"PATH": "/bin"}) is None  # not a JobSet's pod


def test_a_synchronous_jobset_has_chief_and_workers_that_name_each_other_only():
    _, _, document = jobset.manifest(SYNC)
    manifests.check([document])
    assert list(_replicated(document)) == ["chief", "worker"]
    derived = jobset.tf_config_from_env(_pod_env(document, "worker", 1))
    assert derived["cluster"] == {"chief": ["counting-chief-0-0.counting:2222"],
                                  "worker": ["counting-worker-0-0.counting:2222", "counting-worker-0-1.counting:2222"]}
    assert parse_cluster(derived, collective=True).num_worker_replicas == 3


def test_a_broken_environment_is_refused_with_what_to_do():
    _, _, document = jobset.manifest(CENSUS)
    env = _pod_env(document, "worker", 0)
    del env["JOB_COMPLETION_INDEX"]
    with pytest.raises(ClusterError, match="lacks \\['JOB_COMPLETION_INDEX'\\].*Write the manifest again"):
        jobset.tf_config_from_env(env)
    with pytest.raises(ClusterError, match="runs Job 1; elastimator's JobSet has one Job per role"):
        jobset.tf_config_from_env(_pod_env(document, "worker", 0, JOBSET_JOB_INDEX="1"))
    with pytest.raises(ClusterError, match="worker pod 4 is outside the 4 task"):
        jobset.tf_config_from_env(_pod_env(document, "worker", 4))


def test_run_derives_tf_config_only_where_it_is_unset():
    _, _, document = jobset.manifest(CENSUS)
    environ = _pod_env(document, "ps", 0)
    assert jobset.export_tf_config(environ)
    assert json.loads(environ["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}
    given = dict(environ, TF_CONFIG='{"task": {"type": "chief", "index": 0}}')
    assert not jobset.export_tf_config(given) and json.loads(given["TF_CONFIG"])["task"]["type"] == "chief"


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["spec"].update(replicatedJob=[]), "Additional properties are not allowed ('replicatedJob'"),
    (lambda d: d["spec"]["successPolicy"].update(operator="Some"), "'Some' is not one of ['All', 'Any']"),
    (lambda d: d["spec"]["replicatedJobs"][0]["template"]["spec"].update(paralelism=2), "paralelism"),
])
def test_validation_names_what_is_wrong(breakage, message):
    _, _, document = jobset.manifest(CENSUS)
    breakage(document)
    problems = manifests.validate(document)
    assert any(message in p for p in problems), problems


class _Server(http.server.BaseHTTPRequestHandler):
    """A loopback API server that records requests and keeps the custom objects it is given."""

    requests: list = []
    objects: dict = {}

    def _reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        return json.loads(raw) if raw else None

    def do_POST(self):  # pylint: disable=invalid-name
        body = self._body()
        self.requests.append(("POST", self.path, body))
        if self.path.endswith("/jobsets"):
            self.objects[body["metadata"]["name"]] = body
        self._reply(201, body)

    def do_PATCH(self):  # pylint: disable=invalid-name
        body = self._body()
        self.requests.append(("PATCH", self.path, body))
        self._reply(200, body)

    def do_GET(self):  # pylint: disable=invalid-name
        self.requests.append(("GET", self.path, None))
        name = self.path.rsplit("/", 1)[1]
        if name in self.objects:
            return self._reply(200, self.objects[name])
        return self._reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})

    def do_DELETE(self):  # pylint: disable=invalid-name
        self.requests.append(("DELETE", self.path, self._body()))
        self.objects.pop(self.path.rsplit("/", 1)[1], None)
        self._reply(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def log_message(self, *args):
        pass


@pytest.fixture
def api_server():
    _Server.requests, _Server.objects = [], {}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.server_port}"))
    server.shutdown()


def test_submit_and_scale_a_parameter_server_jobset(api_server):
    documents = jobset.manifest(CENSUS)
    assert manifests.submit(documents, api_client=api_server) == [
        "Secret default/census-token", "NetworkPolicy default/census-job-only", "JobSet default/census"]
    assert _Server.requests[2][:2] == ("POST", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")
    _Server.requests.clear()
    said = jobset.scale("census", 3, "default", api_server)
    assert said == "JobSet default/census: 3 worker(s); the others train on"
    (get, _, _), (patch, path, body) = _Server.requests
    assert (get, patch, path) == ("GET", "PATCH", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/census")
    worker = {r["name"]: r for r in body["spec"]["replicatedJobs"]}["worker"]["template"]["spec"]
    assert (worker["parallelism"], worker["completions"]) == (3, 3)
    with pytest.raises(ClusterError, match="has 4 worker slot\\(s\\); asked for 5"):
        jobset.scale("census", 5, "default", api_server)
    with pytest.raises(ClusterError, match="runs at least one pod"):
        jobset.scale("census", 0, "default", api_server)


def test_scaling_a_synchronous_jobset_replaces_it_with_the_new_worker_count(api_server):
    manifests.submit(jobset.manifest(SYNC), api_client=api_server)
    _Server.requests.clear()
    said = jobset.scale("counting", 3, "default", api_server)
    assert said.startswith("JobSet default/counting: replaced with 3 worker(s)")
    methods = [method for method, _, _ in _Server.requests]
    assert methods == ["GET", "DELETE", "GET", "POST"]  # the second GET finds it gone
    assert _Server.requests[1][2]["propagationPolicy"] == "Foreground"  # its pods stop (the chief saves) first
    replacement = _Server.requests[3][2]
    assert not jobset.validate(replacement)
    worker = _replicated(replacement)["worker"]
    assert (worker["template"]["spec"]["parallelism"], worker["template"]["spec"]["completions"]) == (3, 3)
    derived = jobset.tf_config_from_env(_pod_env(replacement, "chief", 0))
    assert len(derived["cluster"]["worker"]) == 3


def test_the_cli_writes_a_jobset_and_validates_it(tmp_path, capsys):
    from elastimator import cli  # pylint: disable=import-outside-toplevel

    out = tmp_path / "census.yaml"
    assert cli.main(["k8s", "manifest", CENSUS.conf, "--image", CENSUS.image, "--api", "jobset", "--ps", "1",
                     "--workers", "2", "--pvc", "m", "-o", str(out)]) == 0
    assert "Secret, NetworkPolicy, JobSet for job census" in capsys.readouterr().out
    assert cli.main(["k8s", "validate", str(out)]) == 0
    assert "valid (Secret, NetworkPolicy, JobSet)" in capsys.readouterr().out
