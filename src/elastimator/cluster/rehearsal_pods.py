"""The pods a TFJob or a JobSet becomes, as their controllers would make them: names, DNS names, environment,
command, volumes and restart policy. Pure: documents in, frozen `Pod`s out; no cluster, no processes.

Each rule is the controller's, read from its source (cited where it is applied):

* TFJob (kubeflow/training-operator): one pod per replica, named `<job>-<type>-<index>` with the replica type in
  lower case, reachable through a per-replica headless service of the same name; TF_CONFIG appended to the
  container named `tensorflow`, its cluster every replica type but the Evaluator, each address
  `<job>-<type>-<index>.<namespace>.svc:<port>`, the port the container's port named `tfjob-port` (default 2222).
* JobSet (kubernetes-sigs/jobset): `replicas` Jobs per replicated job, named `<jobset>-<replicatedJob>-<jobIndex>`,
  each an Indexed Job whose pod `i` has hostname `<job>-<i>` under the JobSet's subdomain (the JobSet's name by
  default), JOB_COMPLETION_INDEX in every container, and the JobSet's labels and annotations for the downward API.
* Kubernetes itself: `$(VAR)` in command, args and env values expands earlier variables; of two variables with
  one name the later wins; HOSTNAME is the pod's hostname.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from typing import Any, Iterable, Mapping

from elastimator.errors import ClusterError

CLUSTER_DOMAIN = "cluster.local"
TFJOB_CONTAINER, TFJOB_PORT_NAME, TFJOB_DEFAULT_PORT = "tensorflow", "tfjob-port", 2222
"""kubeflow/training-operator pkg/apis/kubeflow.org/v1/tensorflow_types.go: TFJobDefaultContainerName,
TFJobDefaultPortName, TFJobDefaultPort."""
JOBSET_LABEL = "jobset.sigs.k8s.io/"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
IMAGE_WORKDIR = "/job"
"""Where docs/kubernetes.md's Dockerfile puts the code (WORKDIR /job, COPY . /job): the image's working directory."""


@dataclasses.dataclass(frozen=True)
class Mount:
    """One volume mounted in the container."""

    path: str
    volume: str
    kind: str
    """persistentVolumeClaim, emptyDir, hostPath, or 'none' for a volumeMount naming no volume of the pod."""
    source: str = ""
    """The claim's name (persistentVolumeClaim) or the host's path (hostPath)."""
    read_only: bool = False


@dataclasses.dataclass(frozen=True)
class Pod:
    """One pod, as its controller would create it."""

    name: str
    role: str
    """The TFJob's replica type as written (Worker) or the JobSet's replicated job's name."""
    index: int
    """The replica index (TFJob) or the completion index (JobSet)."""
    job: str
    """The Job the pod belongs to: `<jobset>-<replicatedJob>-<jobIndex>` (JobSet), the replica type (TFJob)."""
    hostname: str
    dns_names: tuple[str, ...]
    """Every name its peers may use for it, in the order a resolver tries them."""
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    working_dir: str
    mounts: tuple[Mount, ...]
    restart_policy: str
    """OnFailure, Never, Always, or (TFJob) ExitCode."""
    ports: tuple[int, ...] = ()

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)


@dataclasses.dataclass(frozen=True)
class Workload:
    """A manifest's job: its kind, its pods and the fields its controller's success and failure rules read."""

    kind: str
    name: str
    namespace: str
    pods: tuple[Pod, ...]
    spec: dict[str, Any]
    """The TFJob's or JobSet's spec, as written."""


def _secrets(documents: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, str]]:
    found = {}
    for d in documents:
        if d.get("kind") != "Secret":
            continue
        values = {k: base64.b64decode(v).decode() for k, v in (d.get("data") or {}).items()}
        values.update({k: str(v) for k, v in (d.get("stringData") or {}).items()})
        meta = d.get("metadata", {})
        found[(meta.get("namespace", "default"), meta.get("name", ""))] = values
    return found


_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion (k8s.io/kubernetes third_party/forked/golang/expansion): a defined name is
    replaced, an undefined one left as written, `$$` is a `$`."""
    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR.sub(replace, str(text))


@dataclasses.dataclass(frozen=True)
class _PodFacts:
    """What the downward API reads (metadata.name/namespace/labels/annotations, spec.nodeName...)."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]


def _field(path: str, facts: _PodFacts, where: str) -> str:
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        values = facts.labels if match.group(1) == "labels" else facts.annotations
        return values.get(match.group(2), "")
    simple = {"metadata.name": facts.name, "metadata.namespace": facts.namespace, "spec.nodeName": "rehearsal",
              "spec.serviceAccountName": "default"}
    if path in simple:
        return simple[path]
    if path in ("status.podIP", "status.hostIP"):
        return "$(POD_IP)"  # filled in once the pod has its address (rehearsal_net)
    raise ClusterError(f"{where}: fieldRef {path!r} is not one the rehearsal serves (metadata.name, .namespace, "
                       ".labels['...'], .annotations['...'], spec.nodeName, status.podIP).")


def container_env(container: dict[str, Any], facts: _PodFacts, secrets, injected_before: Mapping[str, str],
                  injected_after: Mapping[str, str], where: str) -> dict[str, str]:
    """The container's environment in the kubelet's order: what the controller put before the container's own
    `env` (expanded into it), the `env` entries in order (`$(VAR)` expanding earlier ones), then what the
    controller appended (the training operator appends TF_CONFIG: pkg/controller.v1/tensorflow/
    tfjob_controller.go, SetClusterSpec)."""
    env = dict(injected_before)
    for entry in container.get("env") or []:
        name = entry.get("name")
        if "value" in entry or "valueFrom" not in entry:
            env[name] = expand(entry.get("value", ""), env)
            continue
        source = entry["valueFrom"]
        if "fieldRef" in source:
            env[name] = _field(source["fieldRef"].get("fieldPath", ""), facts, f"{where} env {name}")
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            values = secrets.get((facts.namespace, ref.get("name")))
            if values is None or ref.get("key") not in values:
                if ref.get("optional"):
                    continue
                raise ClusterError(f"{where} env {name}: Secret {facts.namespace}/{ref.get('name')} key "
                                   f"{ref.get('key')!r} is not in the manifest; the kubelet would not start the pod "
                                   "(CreateContainerConfigError). Add the Secret to the manifest.")
            env[name] = values[ref["key"]]
        elif "resourceFieldRef" in source:
            env[name] = "1"
        else:
            raise ClusterError(f"{where} env {name}: valueFrom {sorted(source)} is not one the rehearsal serves "
                               "(fieldRef, secretKeyRef, resourceFieldRef).")
    env.update(injected_after)
    return env


def _mounts(container: dict[str, Any], pod_spec: dict[str, Any]) -> tuple[Mount, ...]:
    volumes = {v.get("name"): v for v in pod_spec.get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount.get("name"), {})
        kind = next((k for k in ("persistentVolumeClaim", "emptyDir", "hostPath", "configMap", "secret", "nfs")
                     if k in volume), "none")
        source = {"persistentVolumeClaim": volume.get("persistentVolumeClaim", {}).get("claimName", ""),
                  "hostPath": volume.get("hostPath", {}).get("path", ""),
                  "nfs": f"{volume.get('nfs', {}).get('server', '')}:{volume.get('nfs', {}).get('path', '')}"}
        mounts.append(Mount(path=mount.get("mountPath", ""), volume=mount.get("name", ""), kind=kind,
                            source=source.get(kind, ""), read_only=bool(mount.get("readOnly"))))
    return tuple(mounts)


def _the_container(pod_spec: dict[str, Any], preferred: str | None, where: str) -> dict[str, Any]:
    containers = pod_spec.get("containers") or []
    if not containers:
        raise ClusterError(f"{where}: the pod template has no containers.")
    if preferred:
        for c in containers:
            if c.get("name") == preferred:
                return c
    if len(containers) > 1:
        names = [c.get("name") for c in containers]
        raise ClusterError(f"{where}: the rehearsal runs one container per pod; got {names}. Leave the sidecars out "
                           "of the manifest you rehearse.")
    return containers[0]


def _pod(name: str, role: str, index: int, job: str, hostname: str, dns_names: Iterable[str], facts: _PodFacts,
         template: dict[str, Any], restart_policy: str, secrets, before: Mapping[str, str],
         after: Mapping[str, str], preferred: str | None) -> Pod:
    pod_spec = template.get("spec", {})
    container = _the_container(pod_spec, preferred, name)
    env = container_env(container, facts, secrets, before, after, name)
    command = tuple(expand(w, env) for w in [*(container.get("command") or []), *(container.get("args") or [])])
    if not command:
        raise ClusterError(f"{name}: container {container.get('name')!r} names no command; the image's ENTRYPOINT "
                           "is not known here. Write the command into the manifest.")
    ports = tuple(int(p["containerPort"]) for p in container.get("ports") or [] if "containerPort" in p)
    return Pod(name=name, role=role, index=index, job=job, hostname=hostname, dns_names=tuple(dns_names),
               command=command, env=tuple(env.items()), working_dir=container.get("workingDir") or IMAGE_WORKDIR,
               mounts=_mounts(container, pod_spec), restart_policy=restart_policy, ports=ports)


def _service_names(service: str, namespace: str) -> list[str]:
    """A Service's DNS names as the cluster's resolver answers them (kubernetes.io/docs/concepts/services-networking/
    dns-pod-service: `<svc>.<ns>.svc.<cluster-domain>`, and the search path `<ns>.svc.<domain> svc.<domain>
    <domain>` of a pod in `namespace` makes `<svc>`, `<svc>.<ns>` and `<svc>.<ns>.svc` resolve too)."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}"]


# --- TFJob ---------------------------------------------------------------------------------------------------


def _tfjob_port(replica: dict[str, Any]) -> int:
    """kubeflow/training-operator pkg/controller.v1/tensorflow/util.go GetPortFromTFJob: the `tensorflow`
    container's port named `tfjob-port`, else 2222."""
    for container in replica.get("template", {}).get("spec", {}).get("containers") or []:
        if container.get("name") == TFJOB_CONTAINER:
            for port in container.get("ports") or []:
                if port.get("name") == TFJOB_PORT_NAME:
                    return int(port["containerPort"])
    return TFJOB_DEFAULT_PORT


def tfjob_cluster(document: dict[str, Any]) -> dict[str, list[str]]:
    """The cluster of the TF_CONFIG the training operator writes (pkg/controller.v1/tensorflow/tensorflow.go
    genClusterSpec): every replica type but Evaluator, in lower case, each replica as
    `<job>-<type>-<index>.<namespace>.svc:<port>`."""
    meta = document.get("metadata", {})
    name, namespace = meta.get("name", ""), meta.get("namespace", "default")
    cluster = {}
    for replica_type, replica in (document.get("spec", {}).get("tfReplicaSpecs") or {}).items():
        if replica_type == "Evaluator":  # "evaluator is not part of training cluster"
            continue
        rt, port = replica_type.lower(), _tfjob_port(replica)
        cluster[rt] = [f"{name}-{rt}-{i}.{namespace}.svc:{port}" for i in range(int(replica.get("replicas", 1)))]
    return cluster


def tfjob_pods(document: dict[str, Any], secrets=None) -> list[Pod]:
    """The pods the training operator creates for a TFJob (see the module doc). TF_CONFIG is set only for a
    distributed job (tfjob_controller.go SetClusterSpec, isDistributed: more than one replica in all)."""
    secrets = secrets or {}
    meta = document.get("metadata", {})
    name, namespace = meta.get("name", ""), meta.get("namespace", "default")
    replicas = document.get("spec", {}).get("tfReplicaSpecs") or {}
    cluster = tfjob_cluster(document)
    distributed = sum(int(r.get("replicas", 1)) for r in replicas.values()) > 1
    pods = []
    for replica_type, replica in replicas.items():
        rt = replica_type.lower()
        template = replica.get("template", {})
        for i in range(int(replica.get("replicas", 1))):
            pod_name = f"{name}-{rt}-{i}"  # common.GenGeneralName(job, rtype, index)
            # The operator's labels (pkg/controller.v1/common: training.kubeflow.org/job-name, replica-type,
            # replica-index, job-role for the master role).
            labels = {**(template.get("metadata", {}).get("labels") or {}),
                      "training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "tfjob-controller",
                      "training.kubeflow.org/replica-type": rt, "training.kubeflow.org/replica-index": str(i)}
            facts = _PodFacts(pod_name, namespace, labels, template.get("metadata", {}).get("annotations") or {})
            after = {}
            if distributed:
                after["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": rt, "index": i},
                                                 "environment": "cloud"})
            pods.append(_pod(pod_name, replica_type, i, rt, pod_name, _service_names(pod_name, namespace), facts,
                             template, replica.get("restartPolicy", "Never"), secrets, {"HOSTNAME": pod_name}, after,
                             TFJOB_CONTAINER))
    return pods


# --- JobSet --------------------------------------------------------------------------------------------------


def jobset_subdomain(document: dict[str, Any]) -> str | None:
    """kubernetes-sigs/jobset pkg/controllers/jobset_controller.go GetSubdomain: network.subdomain, else the
    JobSet's name; None where enableDNSHostnames is off (api/jobset/v1alpha2 defaults it on)."""
    network = document.get("spec", {}).get("network") or {}
    if network.get("enableDNSHostnames") is False:
        return None
    return network.get("subdomain") or document.get("metadata", {}).get("name", "")


def jobset_pods(document: dict[str, Any], secrets=None, restart_attempt: int = 0) -> list[Pod]:
    """The pods of a JobSet's Jobs (see the module doc): labels and annotations from jobset_controller.go
    labelAndAnnotateObject, hostnames from the Indexed Job's rule (kubernetes pkg/controller/job/
    indexed_job_utils.go: hostname `<job>-<index>`, env JOB_COMPLETION_INDEX, annotation
    batch.kubernetes.io/job-completion-index)."""
    secrets = secrets or {}
    meta = document.get("metadata", {})
    name, namespace = meta.get("name", ""), meta.get("namespace", "default")
    subdomain = jobset_subdomain(document)
    replicated_jobs = document.get("spec", {}).get("replicatedJobs") or []
    global_replicas = sum(int(r.get("replicas", 1)) for r in replicated_jobs)
    pods, global_index = [], 0
    for replicated in replicated_jobs:
        rjob, copies = replicated.get("name", ""), int(replicated.get("replicas", 1))
        job_spec = replicated.get("template", {}).get("spec", {})
        template = job_spec.get("template", {})
        completions = int(job_spec.get("completions", job_spec.get("parallelism", 1)))
        if int(job_spec.get("parallelism", completions)) < completions:
            raise ClusterError(f"replicatedJob {rjob}: parallelism {job_spec.get('parallelism')} < completions "
                               f"{completions}; the rehearsal runs every index at once. Set them equal.")
        indexed = job_spec.get("completionMode", "Indexed") == "Indexed"  # JobSet's webhook defaults Indexed
        for job_index in range(copies):
            job_name = f"{name}-{rjob}-{job_index}"  # placement.GenJobName
            shared = {JOBSET_LABEL + "jobset-name": name, JOBSET_LABEL + "replicatedjob-name": rjob,
                      JOBSET_LABEL + "restart-attempt": str(restart_attempt),
                      JOBSET_LABEL + "replicatedjob-replicas": str(copies),
                      JOBSET_LABEL + "global-replicas": str(global_replicas),
                      JOBSET_LABEL + "job-index": str(job_index),
                      JOBSET_LABEL + "job-global-index": str(global_index)}
            global_index += 1
            for i in range(completions):
                hostname = f"{job_name}-{i}"
                labels = {**(template.get("metadata", {}).get("labels") or {}), **shared,
                          "batch.kubernetes.io/job-name": job_name}
                annotations = {**(template.get("metadata", {}).get("annotations") or {}), **shared}
                before = {"HOSTNAME": hostname}
                if indexed:
                    labels["batch.kubernetes.io/job-completion-index"] = str(i)
                    annotations[COMPLETION_INDEX_ANNOTATION] = str(i)
                    before["JOB_COMPLETION_INDEX"] = str(i)
                dns = [] if subdomain is None else _service_names(f"{hostname}.{subdomain}", namespace)
                facts = _PodFacts(hostname, namespace, labels, annotations)
                pods.append(_pod(hostname, rjob, i, job_name, hostname, dns, facts, template,
                                 template.get("spec", {}).get("restartPolicy", "Never"), secrets, before, {}, None))
    return pods


def workload(documents: list[dict[str, Any]]) -> Workload:
    """The one TFJob or JobSet of a manifest, with its pods.

    Raises:
        ClusterError: for a manifest with no job, or more than one.
    """
    jobs = [d for d in documents if d.get("kind") in ("TFJob", "JobSet")]
    if len(jobs) != 1:
        raise ClusterError(f"expected one TFJob or JobSet in the manifest; got {[d.get('kind') for d in documents]}.")
    document = jobs[0]
    secrets = _secrets(documents)
    pods = tfjob_pods(document, secrets) if document["kind"] == "TFJob" else jobset_pods(document, secrets)
    meta = document.get("metadata", {})
    return Workload(kind=document["kind"], name=meta.get("name", ""), namespace=meta.get("namespace", "default"),
                    pods=tuple(pods), spec=document.get("spec", {}))
