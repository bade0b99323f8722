"""Kubernetes: a job conf as a Kubeflow TFJob (kubeflow.org/v1), validated, submitted and scaled.

The manifest holds three objects: a Secret with the job token, a NetworkPolicy
that admits only the job's own pods to its TensorFlow and shard-service ports
(TensorFlow's servers answer anyone who connects: graph ops, variables), and
the TFJob whose Chief, PS, Worker (and Evaluator) replicas each run
`elastimator run`.
The training operator gives every pod its TF_CONFIG. The chief serves the
shard service on SHARD_PORT (its report line on REPORT_PORT); the other pods
reach it through the chief's per-replica service name (`<job>-chief-0`), which
resolves to the pod itself, every port of it. Every worker slot up to
`max_workers` is named in ELASTIMATOR_WORKER_SLOTS, so the parameter servers
can reach workers that scaling adds later.

A job with no PS replicas (`ps=0`) is synchronous: its conf says strategy
'multi_worker_mirrored', the chief and workers all-reduce, and each pod's
TF_CONFIG, which the operator writes as it creates the pod, names the workers
there are. A pod that dies takes its peers' steps down with it: they exit
with a ClusterError, every pod restarts (`ExitCode`) and the group resumes
from the newest checkpoint. A frozen trainer (stopped, its port still answering) fails its liveness probe,
as do its peers waiting on it: each trainer's progress file goes stale past progress_file.STALL_SECS, the
kubelet restarts the containers, and the group resumes the same way. `scale` of such a job sets the Worker replicas and
deletes the chief and worker pods, which the operator creates again with a
TF_CONFIG naming the new workers (the chief saves a checkpoint as it stops).

Validation checks the TFJob against the CRD's schema (vendored in
schemas/tfjob_v1.json) and each pod template against the kubernetes client's
core/v1 models; `submit` refuses a manifest that fails either.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
from typing import Any, Sequence

from elastimator.cluster import k8s_autoscale, pod_budget, progress_file
from elastimator.cluster.k8s_apis import TFJOB
from elastimator.cluster.plan import CHIEF_WAITS_FOR_EVALUATOR_ENV, EVALUATOR_ENV
from elastimator.errors import ClusterError

GROUP, VERSION, PLURAL = TFJOB.group, TFJOB.version, TFJOB.plural
TF_PORT = 2222
SHARD_PORT = 2223
REPORT_PORT = 2224
"""The shard service's report line: workers' per-step reports, cheaper than a gRPC call each."""
EVALUATOR_WAIT_SECS = 900
"""How long a TFJob's chief waits for the evaluator's final round before it ends the job."""
CONTAINER = "tensorflow"
"""The training operator finds the TensorFlow container by this name."""
PROGRESS_PATH = "/tmp/elastimator-progress.json"
"""Where a synchronous trainer's pod keeps its progress file, which its liveness probe reads."""
REPLICA_TYPES = {"chief": "Chief", "ps": "PS", "worker": "Worker", "evaluator": "Evaluator"}
_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas", "tfjob_v1.json")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclasses.dataclass(frozen=True)
class TFJobSpec:
    """A launched job, as Kubernetes should run it."""

    name: str
    conf: str
    image: str
    namespace: str = "default"
    ps: int = 1
    workers: int = 1
    max_workers: int | None = None
    evaluator: bool = False
    model_dir: str = "/mnt/model"
    pvc: str | None = None
    """A ReadWriteMany PersistentVolumeClaim mounted at model_dir (checkpoints must be shared)."""
    cpu: str = "2"
    memory: str = "4Gi"
    max_restarts: int = 3
    """Restarts of a task with no progress between them (no newer checkpoint) before the job fails: each pod
    counts its own (cluster/pod_budget.py), and any number of faults with progress between them is survived."""
    autoscale: bool = False
    """The chief scales the workers within the slots, with the launcher's policy (cluster/k8s_autoscale.py)."""

    def __post_init__(self):
        if not _NAME.match(self.name) or len(self.name) > 40:
            raise ClusterError(f"job name {self.name!r} must be a DNS label of at most 40 characters: lowercase "
                               "letters, digits and '-', starting and ending with a letter or digit.")
        if self.max_restarts < 0:
            raise ClusterError(f"max_restarts must be 0 or more; got {self.max_restarts}.")
        if self.ps < 0 or self.workers < 0:
            raise ClusterError(f"need 0 or more ps and workers; got ps={self.ps}, workers={self.workers}.")
        if self.max_workers is not None and self.max_workers < self.workers:
            raise ClusterError(f"max_workers ({self.max_workers}) must be at least workers ({self.workers}).")
        if self.autoscale and self.synchronous:
            raise ClusterError("--autoscale scales a parameter-server job's workers; a synchronous job (ps=0) "
                               "restarts to scale. Scale it with `elastimator k8s scale`.")
        if self.synchronous and self.max_workers not in (None, self.workers):
            raise ClusterError("a synchronous job (ps=0) has no idle worker slots: each pod's TF_CONFIG names the "
                               "workers that run, and `elastimator k8s scale` starts the group again with a new "
                               "count. Leave --max-workers out.")

    @property
    def synchronous(self) -> bool:
        """No parameter servers: the chief and workers all-reduce (the conf's strategy 'multi_worker_mirrored')."""
        return self.ps == 0

    @classmethod
    def from_args(cls, args) -> "TFJobSpec":
        conf_file = args.conf.split(":")[0]
        default_name = re.sub(r"[^a-z0-9-]+", "-", os.path.basename(conf_file).removesuffix(".py").lower()).strip("-")
        return cls(name=args.name or default_name, conf=args.conf, image=args.image, namespace=args.namespace,
                   ps=args.ps, workers=args.workers, max_workers=args.max_workers, evaluator=args.evaluator,
                   model_dir=args.model_dir, pvc=args.pvc, cpu=args.cpu, memory=args.memory,
                   autoscale=args.autoscale, max_restarts=args.max_restarts)

    @property
    def worker_slots(self) -> int:
        return self.max_workers if self.max_workers is not None else self.workers

    def service_address(self, role: str, index: int, port: int = TF_PORT) -> str:
        """A replica's address through the per-replica service the training operator creates."""
        return f"{self.name}-{role}-{index}.{self.namespace}.svc:{port}"


def _pod_template(spec: TFJobSpec, role: str) -> dict[str, Any]:
    # The operator's TF_CONFIG names the workers of the moment; the slots name those scaling may add.
    return pod_template(spec, role, spec.service_address("chief", 0, SHARD_PORT), worker_slots=not spec.synchronous)


def pod_template(spec: TFJobSpec, role: str, shard_service: str, extra_env: Sequence[dict[str, Any]] = (),
                 worker_slots: bool = False, api: str = "tfjob") -> dict[str, Any]:
    """The pod template of one role's replicas: `elastimator run` of the conf, its environment (the shard
    service at `shard_service`, the job token from the Secret), its ports and resources, the model-dir claim."""
    env: list[dict[str, Any]] = [
        {"name": "ELASTIMATOR_SHARD_SERVICE", "value": shard_service},
        {"name": "ELASTIMATOR_JOB_TOKEN", "valueFrom": {"secretKeyRef": {"name": f"{spec.name}-token", "key": "token"}}},
        {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "2"},
        {"name": EVALUATOR_ENV, "value": str(int(spec.evaluator))},
        {"name": pod_budget.ENV, "value": str(spec.max_restarts)},
        *extra_env,
    ]
    if worker_slots:
        env.insert(2, {"name": "ELASTIMATOR_WORKER_SLOTS",
                       "value": json.dumps([spec.service_address("worker", i) for i in range(spec.worker_slots)])})
    ports = [{"name": "tfjob-port", "containerPort": TF_PORT}]
    autoscaling = None
    if role == "chief" and spec.autoscale:
        autoscaling = k8s_autoscale.chief_settings(spec, api)
        env.append(autoscaling["env"])
    if role == "chief" and spec.evaluator and api == "tfjob":
        # The operator calls a TFJob Succeeded with its chief and stops the evaluator (job/evaluator_done.py).
        env.append({"name": CHIEF_WAITS_FOR_EVALUATOR_ENV, "value": str(EVALUATOR_WAIT_SECS)})
    if role == "chief":
        # Listening beyond loopback is configured here, on purpose: the other pods must reach the service.
        env.append({"name": "ELASTIMATOR_SHARD_SERVICE_LISTEN", "value": f"0.0.0.0:{SHARD_PORT}"})
        env.append({"name": "ELASTIMATOR_SHARD_REPORT_PORT", "value": str(REPORT_PORT)})
        ports.append({"name": "shard-service", "containerPort": SHARD_PORT})
        ports.append({"name": "shard-reports", "containerPort": REPORT_PORT})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image,
        "command": ["elastimator", "run", spec.conf, "--no-progress", "--model-dir", spec.model_dir],
        "env": env,
        "ports": ports,
        "resources": {"requests": {"cpu": spec.cpu, "memory": spec.memory}, "limits": {"memory": spec.memory}},
    }
    if spec.synchronous and role in ("chief", "worker"):
        # A frozen trainer (its port still answers) holds its peers in their all-reduce: each trainer's progress
        # file goes stale, the probe fails, the kubelet restarts the container, and the group resumes.
        env.append({"name": progress_file.ENV, "value": PROGRESS_PATH})
        container["livenessProbe"] = {
            "exec": {"command": ["python", "-m", "elastimator.cluster.progress_file", "--stale-after",
                                 str(int(progress_file.STALL_SECS)), PROGRESS_PATH]},
            "periodSeconds": 10, "failureThreshold": 1}
    pod: dict[str, Any] = {"containers": [container]}
    if autoscaling is not None:
        pod["serviceAccountName"] = autoscaling["serviceAccountName"]
    if spec.pvc:
        container["volumeMounts"] = [{"name": "model-dir", "mountPath": spec.model_dir}]
        pod["volumes"] = [{"name": "model-dir", "persistentVolumeClaim": {"claimName": spec.pvc}}]
    return {"metadata": {"labels": {"app.kubernetes.io/name": "elastimator", "elastimator/job": spec.name}},
            "spec": pod}


def network_policy(spec: TFJobSpec) -> dict[str, Any]:
    """Ingress to the job's pods: only from the job's pods, only to the TensorFlow and shard-service ports."""
    job_pods = {"matchLabels": {"elastimator/job": spec.name}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{spec.name}-job-only", "namespace": spec.namespace},
            "spec": {"podSelector": job_pods, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": job_pods}],
                                  "ports": [{"protocol": "TCP", "port": TF_PORT},
                                            {"protocol": "TCP", "port": SHARD_PORT},
                                            {"protocol": "TCP", "port": REPORT_PORT}]}]}}


def token_secret(spec: TFJobSpec) -> dict[str, Any]:
    """The Secret holding a fresh job token, which every pod reads (ELASTIMATOR_JOB_TOKEN)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": f"{spec.name}-token", "namespace": spec.namespace},
            "stringData": {"token": secrets.token_hex(16)}}


def manifest(spec: TFJobSpec) -> list[dict[str, Any]]:
    """The Secret holding a fresh job token, the NetworkPolicy that keeps everyone else out, and the TFJob."""
    counts = {"chief": 1, "ps": spec.ps, "worker": spec.workers, "evaluator": int(spec.evaluator)}
    # ExitCode: the training operator makes a new pod for a retryable exit code and fails the job on any other
    # (kubeflow/training-operator pkg/controller.v1/tensorflow/tfjob_controller.go ReconcilePods, with
    # pkg/util/train/train_util.go IsRetryableExitCode: 128 and above, 130/137/138/143 in older releases). So a
    # kill, an OOM or a failed liveness probe (137) and `elastimator run`'s other failures in a pod (RETRY_EXIT,
    # 138) restart, while exit 2 (usage), 3 (a failure a restart would repeat) and 4 (restarted past the budget
    # with no progress, pod_budget.py) end the job, as `launch` does.
    replicas = {
        REPLICA_TYPES[role]: {"replicas": count, "restartPolicy": "ExitCode", "template": _pod_template(spec, role)}
        for role, count in counts.items() if count or role == "worker"
    }
    secret = token_secret(spec)
    # No runPolicy.backoffLimit: it would count restarts over the job's whole life and end a job that makes
    # progress (and the operator's PastBackoffLimit sums containers' restartCount, which an ExitCode pod, made
    # anew each time with restartPolicy Never, never raises); each pod's budget ends a crash loop instead.
    tfjob = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TFJob",
             "metadata": {"name": spec.name, "namespace": spec.namespace},
             "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": replicas}}
    return [secret, network_policy(spec), *autoscaler_objects(spec, "tfjob"), tfjob]  # the account before its pod


def autoscaler_objects(spec: TFJobSpec, api: str) -> list[dict[str, Any]]:
    """The chief autoscaler's ServiceAccount, Role and RoleBinding, where the job autoscales."""
    if not spec.autoscale:
        return []
    return k8s_autoscale.rbac(spec, api)


def render(documents: list[dict[str, Any]]) -> str:
    """The documents as YAML, every repeated part written out in full (no `&id001` anchors to copy by hand)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    return yaml.dump_all(documents, Dumper=Dumper, sort_keys=False)


def load_text(text: str) -> list[dict[str, Any]]:
    import yaml

    return [d for d in yaml.safe_load_all(text) if d]


def load(path: str) -> list[dict[str, Any]]:
    try:
        with open(path) as f:
            return load_text(f.read())
    except FileNotFoundError:
        raise ClusterError(f"no manifest at {path}; write one with `elastimator k8s manifest`.") from None


# --- validation ------------------------------------------------------------------------------


def validate(document: dict[str, Any]) -> list[str]:
    """Problems with one TFJob manifest object (empty when valid): the TFJob schema, then core/v1 pod templates;
    the objects beside it (Secret, NetworkPolicy, the autoscaler's RBAC) against their core models.
    `manifests.validate` takes a JobSet's manifest too."""
    kind = document.get("kind")
    if kind in COMMON_KINDS:
        return check_model(document, COMMON_KINDS[kind], kind)
    if kind != "TFJob":
        return [f"unexpected kind {kind!r}; a manifest holds a Secret, a NetworkPolicy, a TFJob or a JobSet, and "
                "for --autoscale a ServiceAccount, Role and RoleBinding."]
    import jsonschema

    with open(_SCHEMA) as f:
        schema = json.load(f)
    validator = jsonschema.Draft7Validator(schema)
    problems = [f"TFJob {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                for e in validator.iter_errors(document)]
    for replica_type, replica in document.get("spec", {}).get("tfReplicaSpecs", {}).items():
        if replica_type not in REPLICA_TYPES.values():
            problems.append(f"TFJob: unknown replica type {replica_type!r}; expected {sorted(REPLICA_TYPES.values())}.")
        template = replica.get("template", {})
        problems += check_model(template, "V1PodTemplateSpec", f"{replica_type}.template")
        names = [c.get("name") for c in template.get("spec", {}).get("containers", [])]
        if CONTAINER not in names:
            problems.append(f"{replica_type}: no container named {CONTAINER!r} (the operator needs it); got {names}.")
    return problems


COMMON_KINDS = {"Secret": "V1Secret", "NetworkPolicy": "V1NetworkPolicy", "ServiceAccount": "V1ServiceAccount",
                "Role": "V1Role", "RoleBinding": "V1RoleBinding"}
"""The objects beside a job in its manifest, by kind, with the core model each is checked against."""


def check_model(value: Any, type_name: str, where: str) -> list[str]:
    """Checks a JSON value against the kubernetes client's core/v1 model: fields, their types, required ones.

    The client's models (kubernetes >= 37) are generated from the core OpenAPI
    schema and forbid unknown fields, so a typo is an error here rather than a
    field the API server silently drops.
    """
    import pydantic
    from kubernetes import client

    try:
        getattr(client, type_name).model_validate(value)
    except pydantic.ValidationError as e:
        return [f"{where}.{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in e.errors()]
    return []


# --- the cluster -----------------------------------------------------------------------------


def connect(api_client=None):
    if api_client is not None:
        return api_client
    from kubernetes import client, config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except (config.ConfigException, OSError) as e:
            raise ClusterError(f"no Kubernetes cluster to talk to: not inside a pod, and the kubeconfig "
                               f"({os.environ.get('KUBECONFIG', '~/.kube/config')}) could not be read ({e}). Point "
                               "KUBECONFIG at your cluster's config, or run `elastimator k8s manifest` and apply "
                               "its output with kubectl.") from None
    return client.ApiClient()


def create_common(document: dict[str, Any], api) -> None:
    """Creates one of the objects beside a job (COMMON_KINDS) through the API client `api`."""
    from kubernetes import client

    namespace = document["metadata"].get("namespace", "default")
    create = {"Secret": client.CoreV1Api(api).create_namespaced_secret,
              "NetworkPolicy": client.NetworkingV1Api(api).create_namespaced_network_policy,
              "ServiceAccount": client.CoreV1Api(api).create_namespaced_service_account,
              "Role": client.RbacAuthorizationV1Api(api).create_namespaced_role,
              "RoleBinding": client.RbacAuthorizationV1Api(api).create_namespaced_role_binding}[document["kind"]]
    create(namespace, document)


def create(document: dict[str, Any], api) -> None:
    """Creates a TFJob through the API client `api`."""
    from kubernetes import client

    namespace = document["metadata"].get("namespace", "default")
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, document)


def scale_patch(workers: int) -> dict[str, Any]:
    if workers < 0:
        raise ClusterError(f"workers must be 0 or more; got {workers}.")
    return {"spec": {"tfReplicaSpecs": {"Worker": {"replicas": workers}}}}


def scale(name: str, workers: int, namespace: str = "default", api_client=None) -> str:
    """Sets a TFJob's Worker replicas (a merge patch); the operator starts or stops worker pods. A synchronous
    job's chief and worker pods are deleted as well, for the operator to create again with a TF_CONFIG that names
    the new workers. Returns what was done."""
    from kubernetes import client

    api = connect(api_client)
    objects = client.CustomObjectsApi(api)
    job = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, scale_patch(workers))
    if REPLICA_TYPES["ps"] in job.get("spec", {}).get("tfReplicaSpecs", {}):
        return f"TFJob {namespace}/{name}: {workers} worker(s); the others train on"
    client.CoreV1Api(api).delete_collection_namespaced_pod(namespace, label_selector=trainer_pods(name))
    return (f"TFJob {namespace}/{name}: {workers} worker(s); its chief and worker pods start again with them, "
            "from the checkpoint the chief saves as it stops")


def trainer_pods(name: str) -> str:
    """The label selector of a TFJob's chief and worker pods (the training operator's labels)."""
    return f"training.kubeflow.org/job-name={name},training.kubeflow.org/replica-type in (chief,worker)"
