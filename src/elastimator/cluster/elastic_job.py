"""DLRover's ElasticJob (elastic.iml.github.io/v1alpha1) as elastimator's manifest: `elastimator k8s convert`.

A DLRover user's job YAML names, per role (ps, worker, evaluator, chief), a pod template whose container runs
DLRover's entry command, and DLRover's master besides. `convert` keeps what has a counterpart:

* the name and namespace; each role's replica count (`autoScale` without a count: 1, and a note), DLRover's
  worker 0 becoming the Chief where the job names no chief (as `--worker_num` counts the chief);
* each role's image, pull policy, resources, environment, volume mounts, and the pod's volumes, node
  selection and tolerations, laid over elastimator's pod template for that role;
* the command, with `-m elastimator.compat` put in front of its `python -m` (DLRover's entry command then runs
  on elastimator with its flags, elastimator/dlrover_entry.py; a program module or script runs under
  the compat runner);
* `distributionStrategy`: ParameterServerStrategy as a parameter-server job, AllreduceStrategy as a
  synchronous one (no ps).

Everything else is named in one line each (`Conversion.notes`), none dropped silently: DLRover's master (the
chief hosts elastimator's shard service), `resourceLimits` (a budget for DLRover's autoscaler; elastimator's
scaling is bounded by the worker slots), `restartPolicy: Never` (elastimator's pods restart), and any
field it does not know.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from typing import Any

from elastimator.cluster import k8s, pod_budget
from elastimator.errors import ClusterError

ROLES = ("ps", "chief", "worker", "evaluator")
_POD_FIELDS = ("volumes", "nodeSelector", "tolerations", "affinity", "serviceAccountName", "imagePullSecrets",
               "priorityClassName", "schedulerName")
"""Pod-level fields of an ElasticJob role that carry over as they are."""
_CONTAINER_FIELDS = ("image", "imagePullPolicy", "resources", "volumeMounts", "workingDir")
_KNOWN_SPEC = {"distributionStrategy", "replicaSpecs", "resourceLimits", "optimizeMode", "envs", "suspend"}
_PYTHON_M = re.compile(r"(\bpython[\d.]*\s+)-m\s+(?!elastimator\.compat\b)")
_PYTHON_SCRIPT = re.compile(r"(\bpython[\d.]*\s+)(?=[\w./-]+\.py\b)")


@dataclasses.dataclass(frozen=True)
class Conversion:
    documents: list[dict[str, Any]]
    """The Secret, the NetworkPolicy and the TFJob (or JobSet)."""
    notes: list[str]
    """One line per ElasticJob field that has no counterpart, and what became of it."""


def convert(elastic_job: dict[str, Any], api: str = "tfjob") -> Conversion:
    """elastimator's manifest for an ElasticJob (see the module doc).

    Raises:
        ClusterError: for a document that is not an ElasticJob, or one without ps, worker or chief roles.
    """
    if elastic_job.get("kind") != "ElasticJob" or not str(elastic_job.get("apiVersion", "")).startswith(
            "elastic.iml.github.io/"):
        raise ClusterError(f"expected a DLRover ElasticJob (apiVersion elastic.iml.github.io/v1alpha1); got "
                           f"{elastic_job.get('apiVersion')!r} {elastic_job.get('kind')!r}.")
    metadata, spec = elastic_job.get("metadata", {}), elastic_job.get("spec", {})
    notes: list[str] = []
    replica_specs = spec.get("replicaSpecs") or {}
    for role in replica_specs:
        if role == "dlrover-master":
            notes.append("replicaSpecs.dlrover-master: not needed; the chief hosts elastimator's shard service.")
        elif role not in ROLES:
            notes.append(f"replicaSpecs.{role}: no such role in elastimator ({', '.join(ROLES)}); left out.")
    for key in sorted(set(spec) - _KNOWN_SPEC):
        notes.append(f"spec.{key}: unknown to elastimator; left out.")
    if "resourceLimits" in spec:
        notes.append(f"spec.resourceLimits {spec['resourceLimits']}: the budget of DLRover's autoscaler; elastimator "
                     "scales workers within the manifest's worker slots instead (what the CPU budget pays for, "
                     "where the workers request CPU).")
    if "optimizeMode" in spec:
        notes.append(f"spec.optimizeMode {spec['optimizeMode']!r}: DLRover's resource optimizer; no counterpart.")
    roles = {role: replica_specs[role] for role in ROLES if role in replica_specs}
    if not roles.keys() & {"ps", "worker", "chief"}:
        raise ClusterError("the ElasticJob has no ps, worker or chief role to convert.")
    counts = {role: _count(role, replica, notes) for role, replica in roles.items()}
    strategy = spec.get("distributionStrategy", "ParameterServerStrategy")
    synchronous = strategy == "AllreduceStrategy"
    if strategy not in ("ParameterServerStrategy", "AllreduceStrategy"):
        notes.append(f"spec.distributionStrategy {strategy!r}: unknown; converted as ParameterServerStrategy.")
    if synchronous and counts.get("ps"):
        notes.append("replicaSpecs.ps: an AllreduceStrategy job has no parameter servers; left out.")
    first = _container(*next(iter(roles.items())))  # the image and the conf, for the spec; each role overlays its own
    workers = counts.get("worker", 0)
    if workers and "chief" not in counts:
        notes.append(f"replicaSpecs.worker: {workers} worker(s), DLRover's worker 0 being the chief: a Chief and "
                     f"{workers - 1} Worker(s), the same {workers} trainer(s).")
        workers -= 1
    autoscaled = bool(roles.get("worker", {}).get("autoScale")) and not synchronous
    if autoscaled and api == "jobset" and workers == 0:
        notes.append("replicaSpecs.worker: a JobSet's worker Job runs at least one pod, so the job starts with 1 "
                     "worker beside the chief.")
        workers = 1
    max_workers = _worker_budget(spec.get("resourceLimits", {}), roles, counts, workers) if autoscaled else None
    if autoscaled:
        notes.append(f"replicaSpecs.worker autoScale: the chief scales the workers between "
                     f"{1 if api == 'jobset' else 0} and {max_workers} with elastimator's policy (the ps count stays "
                     "fixed).")
    job = k8s.TFJobSpec(
        name=metadata.get("name", "job"), namespace=metadata.get("namespace", "default"),
        conf=_conf(first.get("command", []) + first.get("args", [])) or "conf", image=first.get("image", ""),
        ps=0 if synchronous else counts.get("ps", 1), workers=workers,
        evaluator=bool(counts.get("evaluator")), autoscale=autoscaled, max_workers=max_workers,
        max_restarts=max([int(r.get("restartCount", 3)) for r in roles.values()] or [3]))
    if api == "jobset":
        from elastimator.cluster import jobset  # pylint: disable=import-outside-toplevel

        documents = jobset.manifest(job)
        templates = {r["name"]: r["template"]["spec"]["template"] for r in documents[-1]["spec"]["replicatedJobs"]}
    else:
        documents = k8s.manifest(job)
        replicas = documents[-1]["spec"]["tfReplicaSpecs"]
        templates = {role: replicas[kind]["template"] for role, kind in k8s.REPLICA_TYPES.items() if kind in replicas}
    for role, template in templates.items():
        source = roles.get(role) or roles.get("worker") or next(iter(roles.values()))  # a chief like the workers
        _overlay(template, source, role, notes)
    if any(t["spec"]["containers"][0]["command"][:2] != ["elastimator", "run"] for t in templates.values()):
        _count_over_the_life(documents[-1], job.max_restarts, api)
        notes.append(f"restartCount {job.max_restarts}: the pods run DLRover's own command, not `elastimator run`, "
                     "which keeps a budget that refills with progress; so the restarts count over the job's life "
                     f"({'each Job' if api == 'jobset' else 'runPolicy'} backoffLimit), as in DLRover.")
    return Conversion(documents, notes)


def _count_over_the_life(workload: dict[str, Any], limit: int, api: str) -> None:
    """Restarts in place (OnFailure) counted over the job's whole life, for pods that keep no budget of their own
    (cluster/pod_budget.py): without one, a retryable-only restart policy would restart a crash loop for ever."""
    if api == "jobset":
        for replicated in workload["spec"]["replicatedJobs"]:
            spec = replicated["template"]["spec"]
            spec.pop("podFailurePolicy", None)  # it needs restartPolicy Never
            spec["template"]["spec"]["restartPolicy"] = "OnFailure"
        workload["spec"]["failurePolicy"] = {"maxRestarts": limit}
    else:
        for replica in workload["spec"]["tfReplicaSpecs"].values():
            replica["restartPolicy"] = "OnFailure"
        workload["spec"]["runPolicy"]["backoffLimit"] = limit
    for template in _templates(workload, api):
        container = template["spec"]["containers"][0]
        container["env"] = [e for e in container["env"] if e["name"] != pod_budget.ENV]


def _templates(workload: dict[str, Any], api: str) -> list[dict[str, Any]]:
    if api == "jobset":
        return [r["template"]["spec"]["template"] for r in workload["spec"]["replicatedJobs"]]
    return [r["template"] for r in workload["spec"]["tfReplicaSpecs"].values()]


def _cpu(quantity: Any) -> float | None:
    """A Kubernetes CPU quantity ("2", "500m", 1.5) in cores; None where it does not parse."""
    text = str(quantity).strip()
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        return None


def _worker_budget(limits: dict[str, Any], roles: dict[str, Any], counts: dict[str, int], workers: int) -> int:
    """How many workers the job's CPU budget pays for beside its other tasks (the chief costing a worker); twice
    the starting count plus one where the budget or the requests are not given."""
    def request(role: str) -> float | None:
        source = roles.get(role) or roles.get("worker", {})
        return _cpu(_container(role, source).get("resources", {}).get("requests", {}).get("cpu", "x"))

    budget, per_worker = _cpu(limits.get("cpu", "x")), request("worker")
    if budget is None or not per_worker:
        return 2 * workers + 1
    others = sum((request(role) or per_worker) * counts.get(role, 0) for role in ("ps", "evaluator")) + per_worker
    return max(workers, int((budget - others) // per_worker))


def _count(role: str, replica: dict[str, Any], notes: list[str]) -> int:
    if "replicas" in replica:
        return int(replica["replicas"])
    default = 1
    if replica.get("autoScale"):
        notes.append(f"replicaSpecs.{role}: autoScale without replicas (DLRover's autoscaler chose the count); "
                     f"starts with {default}. Scale with `elastimator k8s scale`.")
    return default


def _container(role: str, replica: dict[str, Any]) -> dict[str, Any]:
    containers = replica.get("template", {}).get("spec", {}).get("containers") or []
    if not containers:
        raise ClusterError(f"replicaSpecs.{role}: its pod template has no container.")
    return containers[0]


def _command(command: list[str]) -> list[str]:
    """The container command with elastimator's compat runner in front of each `python -m` / `python X.py`."""
    return [_PYTHON_SCRIPT.sub(r"\1-m elastimator.compat ", _PYTHON_M.sub(r"\1-m elastimator.compat -m ", part))
            for part in command]


def _conf(command: list[str]) -> str | None:
    """The `--conf=` of DLRover's entry command, if the command has one."""
    for word in shlex.split(" ".join(command).replace("\\\n", " ")):
        if word.startswith("--conf="):
            return word[len("--conf="):]
    return None


def _overlay(template: dict[str, Any], replica: dict[str, Any], role: str, notes: list[str]) -> None:
    """Lays an ElasticJob role's container and pod fields over elastimator's pod template for that role."""
    source_pod = replica.get("template", {}).get("spec", {})
    source = _container(role, replica)
    command = _command(source.get("command", []) + source.get("args", []))
    pod = template["spec"]
    container = pod["containers"][0]
    if command:
        container["command"] = command
    for field in _CONTAINER_FIELDS:
        if field in source:
            container[field] = source[field]
    container["env"] = container.get("env", []) + [e for e in source.get("env", [])
                                                   if e.get("name") not in {x["name"] for x in container["env"]}]
    for field in _POD_FIELDS:
        if field in source_pod:
            pod[field] = source_pod[field]
    if source_pod.get("restartPolicy") == "Never" and role in ("ps", "worker"):
        note = ("restartPolicy Never: elastimator's pods restart, and a restarted task rejoins (workers through "
                "the shard service, a ps from the newest checkpoint).")
        if note not in notes:
            notes.append(note)
