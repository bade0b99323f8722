"""Kubernetes without the Kubeflow operator: a job conf as a JobSet (jobset.x-k8s.io/v1alpha2).

JobSet (kubernetes-sigs/jobset) runs groups of Jobs and is what Kubeflow Trainer v2 and Kueue build on; it
knows nothing of TensorFlow, so nobody writes a TF_CONFIG for the pods. The manifest is:

* the Secret with the job token and the NetworkPolicy admitting only the job's pods, as for a TFJob;
* a JobSet with one replicated job per role (ps, chief, worker, evaluator; chief and workers only for a
  synchronous job), each one Indexed Job whose pods are the role's tasks: pod `i` of role `r` is task `i`,
  reachable as `<job>-<r>-0-<i>.<job>` through the headless service JobSet makes for its `network`.
  The JobSet succeeds when the chief (and the evaluator) have. A failed pod is replaced by a new one with its
  index (`podFailurePolicy`), not counted towards the Job's backoffLimit, unless it exited with a permanent
  code (usage, a repeating failure, restarted past its budget with no progress: cluster/pod_budget.py), which
  fails the Job and the JobSet (`failurePolicy.rules`).

A pod's template is its role's, shared by all its tasks, so its TF_CONFIG is derived as it starts
(`tf_config_from_env`, called by `elastimator run` before anything reads TF_CONFIG): the role from its
replicated job's name and the task index from the Job's completion index (both given by the downward API and
the Job controller), every task's address from the JobSet's name, its subdomain and the role counts the
manifest wrote. Worker *slots* up to `max_workers` are named, so that the parameter servers can reach workers
scaling adds later, as with a TFJob.

Scaling a parameter-server job sets its worker Job's parallelism and completions (an elastic Indexed Job:
JobSet releases with elastic JobSets, Kubernetes 1.27 or newer); the highest-numbered workers leave first.
A synchronous job's TF_CONFIG names the workers there are, so it is replaced: the JobSet is deleted (the chief
saves a checkpoint as it stops) and created again with the new count, and it resumes from that checkpoint.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping, MutableMapping

from elastimator.cluster.k8s_apis import JOBSET
from elastimator.cluster.k8s import (
    CONTAINER,
    SHARD_PORT,
    TF_PORT,
    TFJobSpec,
    autoscaler_objects,
    check_model,
    network_policy,
    pod_template,
    token_secret,
)
from elastimator.errors import OUT_OF_RESTARTS_EXIT, REPEATING_EXIT, USAGE_EXIT, ClusterError

GROUP, VERSION, PLURAL = JOBSET.group, JOBSET.version, JOBSET.plural
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas", "jobset_v1alpha2.json")
ROLES_ENV = "ELASTIMATOR_JOBSET_ROLES"
"""The manifest's role counts (JSON: {"ps": 1, "chief": 1, "worker": 4}; workers counted by slot)."""
SUBDOMAIN_ENV = "ELASTIMATOR_JOBSET_SUBDOMAIN"
NAME_ENV, ROLE_ENV, JOB_INDEX_ENV = "JOBSET_NAME", "REPLICATED_JOB_NAME", "JOBSET_JOB_INDEX"
"""Set from the pod's JobSet labels by the downward API."""
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
"""Set by the Job controller in every container of an Indexed Job's pod."""
_LABEL = "jobset.sigs.k8s.io/"


def host(spec_name: str, subdomain: str, role: str, index: int, port: int = TF_PORT) -> str:
    """Task `index` of `role`: pod `index` of the role's only Job, through the JobSet's headless service."""
    return f"{spec_name}-{role}-0-{index}.{subdomain}:{port}"


def roles(spec: TFJobSpec) -> dict[str, int]:
    """Each role's task count, workers by slot (a synchronous job's slots are its workers; the evaluator is not a
    cluster member)."""
    counts = {"ps": spec.ps, "chief": 1, "worker": spec.worker_slots}
    return {role: count for role, count in counts.items() if count}


def manifest(spec: TFJobSpec) -> list[dict[str, Any]]:
    """The Secret, the NetworkPolicy and the JobSet of a job (see the module doc)."""
    if spec.max_workers is not None and spec.max_workers > spec.workers and not spec.workers:
        raise ClusterError("a JobSet's worker Job runs at least one pod, so a job that scales its workers starts "
                           "with --workers 1 or more.")
    subdomain = spec.name
    env = [
        {"name": ROLES_ENV, "value": json.dumps(roles(spec), sort_keys=True)},
        {"name": SUBDOMAIN_ENV, "value": subdomain},
        *({"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{_LABEL}{label}']"}}}
          for name, label in ((NAME_ENV, "jobset-name"), (ROLE_ENV, "replicatedjob-name"),
                              (JOB_INDEX_ENV, "job-index"))),
    ]
    counts = {"ps": spec.ps, "chief": 1, "worker": spec.workers, "evaluator": int(spec.evaluator)}
    shard_service = host(spec.name, subdomain, "chief", 0, SHARD_PORT)
    replicated = []
    for role, count in counts.items():
        if not count:
            continue
        template = pod_template(spec, role, shard_service, extra_env=env, api="jobset")
        template["spec"]["restartPolicy"] = "Never"  # what a podFailurePolicy needs; a new pod keeps the index
        replicated.append({"name": role, "replicas": 1, "template": {"spec": {
            "completionMode": "Indexed", "parallelism": count, "completions": count,
            "backoffLimit": spec.max_restarts * count, "podFailurePolicy": pod_failure_policy(),
            "template": template}}})
    finishers = ["chief"] + (["evaluator"] if spec.evaluator else [])
    jobset = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "JobSet",
              "metadata": {"name": spec.name, "namespace": spec.namespace,
                           "labels": {"app.kubernetes.io/name": "elastimator", "elastimator/job": spec.name}},
              "spec": {"network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True,
                                   "subdomain": subdomain},
                       "successPolicy": {"operator": "All", "targetReplicatedJobs": finishers},
                       "failurePolicy": failure_policy(spec),
                       "replicatedJobs": replicated}}
    return [token_secret(spec), network_policy(spec), *autoscaler_objects(spec, "jobset"), jobset]


NOT_IN_IMAGE_EXITS = (126, 127)
"""The shell's exits for a command the image cannot run (not executable, not found): a new pod has the same image."""
PERMANENT_EXITS = (USAGE_EXIT, REPEATING_EXIT, OUT_OF_RESTARTS_EXIT, *NOT_IN_IMAGE_EXITS)
"""Exit codes that a restart would not cure: `elastimator run`'s usage, a repeating failure, past the budget; and a
command missing from the image (as a TFJob's ExitCode policy treats every exit below 128)."""


def pod_failure_policy() -> dict[str, Any]:
    """Each Job's rules for a failed pod (kubernetes batch/v1 Job `podFailurePolicy`, pkg/controller/job
    pod_failure_policy.go: rules in order, the first that matches decides; it needs restartPolicy Never):

    * a permanent exit (PERMANENT_EXITS, among them pod_budget's restarts past the budget) fails the Job at once;
    * any other exit (a kill, an OOM, a failed liveness probe, RETRY_EXIT) and a disruption (preemption,
      eviction: the DisruptionTarget condition) make a new pod without counting towards `backoffLimit`, which
      counts over the Job's whole life: the pods' own budget (pod_budget.py) ends a crash loop instead, and
      backoffLimit only failures no rule matches.
    """
    exits = sorted(PERMANENT_EXITS)
    return {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": exits}},
        {"action": "Ignore", "onExitCodes": {"containerName": CONTAINER, "operator": "NotIn", "values": exits}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]}


def failure_policy(spec: TFJobSpec) -> dict[str, Any]:
    """The JobSet's: a Job failed by its pod failure policy (a permanent exit) fails the JobSet, with no restart
    of the whole set (kubernetes-sigs/jobset api/jobset/v1alpha2 FailurePolicyRule, `onJobFailureReasons`
    PodFailurePolicy, the Job's reason; pkg/controllers/failure_policy.go); a Job failed otherwise (past its
    backoffLimit) restarts the JobSet up to `maxRestarts` times."""
    return {"maxRestarts": spec.max_restarts,
            "rules": [{"name": "permanent-exit", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]}


def tf_config_from_env(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The TF_CONFIG of this pod of an elastimator JobSet, from its environment (see the module doc); None
    outside one.

    Raises:
        ClusterError: when the environment is an elastimator JobSet's but incomplete or inconsistent.
    """
    if ROLES_ENV not in env:
        return None
    missing = [name for name in (NAME_ENV, ROLE_ENV, JOB_INDEX_ENV, COMPLETION_INDEX_ENV, SUBDOMAIN_ENV)
               if not env.get(name)]
    if missing:
        raise ClusterError(f"this pod is an elastimator JobSet's ({ROLES_ENV} is set) but lacks {missing}: its "
                           "template is not the one `elastimator k8s manifest --api jobset` wrote, or the Job is not "
                           "Indexed. Write the manifest again and apply it unchanged.")
    try:
        counts = json.loads(env[ROLES_ENV])
        role, index, job_index = env[ROLE_ENV], int(env[COMPLETION_INDEX_ENV]), int(env[JOB_INDEX_ENV])
    except ValueError as e:
        raise ClusterError(f"this pod's JobSet environment does not parse ({e}); write the manifest again.") from None
    if job_index != 0:
        raise ClusterError(f"replicated job {role!r} runs Job {job_index}; elastimator's JobSet has one Job per role "
                           "(its tasks are that Job's pods). Set its replicas back to 1.")
    if role != "evaluator" and not 0 <= index < counts.get(role, 0):
        raise ClusterError(f"{role} pod {index} is outside the {counts.get(role, 0)} task(s) the manifest named for "
                           f"{role!r}; scale with `elastimator k8s scale`, which keeps them in step.")
    name, subdomain = env[NAME_ENV], env[SUBDOMAIN_ENV]
    cluster = {r: [host(name, subdomain, r, i) for i in range(n)] for r, n in counts.items()}
    return {"cluster": cluster, "task": {"type": role, "index": index}}


def export_tf_config(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Sets TF_CONFIG from the JobSet environment where it is unset (confs may read it as they are imported, and
    a strategy reads it as it is made); returns whether it did."""
    if environ.get("TF_CONFIG", "").strip():
        return False
    derived = tf_config_from_env(environ)
    if derived is None:
        return False
    environ["TF_CONFIG"] = json.dumps(derived)
    return True


# --- validation, submission, scaling ---------------------------------------------------------------------------


def validate(document: dict[str, Any]) -> list[str]:
    """Problems with a JobSet (empty when valid): its spec against JobSet's CRD schema, each Job template against
    the kubernetes client's batch/v1 models."""
    import jsonschema

    with open(SCHEMA) as f:
        schema = json.load(f)
    problems = [f"JobSet {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                for e in jsonschema.Draft7Validator(schema).iter_errors(document)]
    for replicated in document.get("spec", {}).get("replicatedJobs", []) or []:
        if isinstance(replicated, dict):
            problems += check_model(replicated.get("template", {}), "V1JobTemplateSpec",
                                    f"replicatedJobs[{replicated.get('name')}].template")
    return problems


def create(document: dict[str, Any], api) -> None:
    from kubernetes import client

    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, document["metadata"].get("namespace", "default"), PLURAL, document)


def scale(name: str, workers: int, namespace: str, api, wait_secs: float = 120.0) -> str:
    """Runs `workers` workers (see the module doc); returns what was done."""
    from kubernetes import client

    if workers < 1:
        raise ClusterError(f"a JobSet's worker Job runs at least one pod; got --workers {workers}.")
    objects = client.CustomObjectsApi(api)
    jobset = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    replicated = jobset["spec"]["replicatedJobs"]
    names = [r["name"] for r in replicated]
    if "worker" not in names:
        raise ClusterError(f"JobSet {namespace}/{name} has no worker Job to scale (it was written with --workers 0).")
    if "ps" in names:
        slots = _slots(jobset)
        if workers > slots:
            raise ClusterError(f"JobSet {namespace}/{name} has {slots} worker slot(s); asked for {workers}. Write "
                               "the manifest with a larger --max-workers to scale that far.")
        patched = [dict(r, template={**r["template"], "spec": {**r["template"]["spec"], "parallelism": workers,
                                                                 "completions": workers}})
                   if r["name"] == "worker" else r for r in replicated]
        objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                               {"spec": {"replicatedJobs": patched}})
        return f"JobSet {namespace}/{name}: {workers} worker(s); the others train on"
    replacement = _resized(jobset, workers)
    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                            body=client.V1DeleteOptions(propagation_policy="Foreground"))
    deadline = time.monotonic() + wait_secs
    while _exists(objects, namespace, name):
        if time.monotonic() > deadline:
            raise ClusterError(f"JobSet {namespace}/{name} was still being deleted after {wait_secs:.0f}s; nothing "
                               "was created. Run the same `elastimator k8s scale` again once it is gone.")
        time.sleep(1.0)
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, replacement)
    return (f"JobSet {namespace}/{name}: replaced with {workers} worker(s); the chief saved a checkpoint as it "
            "stopped, and the job resumes from it")


def _slots(jobset: dict[str, Any]) -> int:
    worker = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "worker")
    env = {e["name"]: e.get("value") for e in worker["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    return json.loads(env[ROLES_ENV])["worker"]


def _resized(jobset: dict[str, Any], workers: int) -> dict[str, Any]:
    """A synchronous JobSet as it was submitted, with `workers` workers (and every template's role counts)."""
    metadata = {k: v for k, v in jobset["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    replicated = []
    for r in jobset["spec"]["replicatedJobs"]:
        spec = dict(r["template"]["spec"])
        if r["name"] == "worker":
            spec.update(parallelism=workers, completions=workers)
        pod = spec["template"]
        containers = []
        for container in pod["spec"]["containers"]:
            env = [dict(e, value=json.dumps({**json.loads(e["value"]), "worker": workers}, sort_keys=True))
                   if e["name"] == ROLES_ENV else e for e in container["env"]]
            containers.append(dict(container, env=env))
        spec["template"] = dict(pod, spec=dict(pod["spec"], containers=containers))
        replicated.append({k: v for k, v in r.items() if k != "template"} | {"template": {"spec": spec}})
    return {"apiVersion": jobset["apiVersion"], "kind": "JobSet", "metadata": metadata,
            "spec": {k: v for k, v in jobset["spec"].items() if k != "replicatedJobs"} | {"replicatedJobs": replicated}}


def _exists(objects, namespace: str, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True
