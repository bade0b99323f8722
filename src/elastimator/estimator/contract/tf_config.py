"""`TF_CONFIG`: where a process sits in a cluster. The only module that reads that environment variable.

`parse_cluster` turns the JSON into a `ClusterInfo` and checks every rule on
the way, naming the broken rule and what a valid TF_CONFIG looks like. The rest
of the package asks `RunConfig.cluster`, never the environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import ConfigError

WORKER_SLOTS_ENV = "ELASTIMATOR_WORKER_SLOTS"
_KEYS = frozenset({"cluster", "task", "environment", "rpc_layer", "session_master", "service"})
_EXAMPLE = ('{"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"], "ps": ["localhost:2224"]}, '
            '"task": {"type": "worker", "index": 0}}')


class TaskType:
    """Roles a process can have in a `TF_CONFIG` cluster."""

    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"
    MASTER = "master"

    ALL = (CHIEF, WORKER, PS, EVALUATOR, MASTER)


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """Where this process sits in the cluster described by `TF_CONFIG`."""

    cluster_spec: tf.train.ClusterSpec
    task_type: str
    task_id: int
    master: str
    evaluation_master: str
    is_chief: bool
    num_ps_replicas: int
    num_worker_replicas: int
    global_id_in_cluster: int
    service: Mapping[str, Any] | None

    @property
    def is_distributed(self) -> bool:
        return bool(self.cluster_spec.as_dict()) and self.task_type != TaskType.EVALUATOR


LOCAL = ClusterInfo(cluster_spec=tf.train.ClusterSpec({}), task_type=TaskType.WORKER, task_id=0, master="",
                    evaluation_master="", is_chief=True, num_ps_replicas=0, num_worker_replicas=1,
                    global_id_in_cluster=0, service=None)
"""One process, no cluster: what an unset TF_CONFIG means."""

LOCAL_JOB_TF_CONFIG = {"cluster": {"ps": [], "worker": []}, "task": {"type": "chief", "index": 0}}
"""What `elastimator run` puts in TF_CONFIG when it is unset: this one process is the chief; there are no
parameter servers and no other workers. Confs written for DLRover's trainer (which always set TF_CONFIG) size
their models from it, e.g. `len(TF_CONFIG["cluster"]["ps"])` partitions."""


class _Invalid(Exception):
    """A broken rule, worded for the error `parse_cluster` raises."""


def read_tf_config() -> dict[str, Any]:
    """Returns the parsed `TF_CONFIG` environment variable ({} when unset)."""
    raw = os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"TF_CONFIG is not valid JSON ({e.msg} at position {e.pos}). Received: {raw!r}. "
            "Set it with json.dumps({...}) or unset it for local training."
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"TF_CONFIG must be a JSON object; got {type(parsed).__name__}: {raw!r}.")
    return with_worker_slots(parsed, os.environ.get(WORKER_SLOTS_ENV, ""))


def with_worker_slots(tf_config: dict[str, Any], slots_json: str) -> dict[str, Any]:
    """TF_CONFIG with its worker list widened to every slot scaling may fill (ELASTIMATOR_WORKER_SLOTS).

    A Kubernetes TFJob's TF_CONFIG lists the workers of the moment; the
    parameter servers must also be able to reach workers added later, whose
    addresses are known in advance (cluster/k8s.py writes the slot list).
    """
    if not slots_json.strip() or not isinstance(tf_config.get("cluster"), dict):
        return tf_config
    try:
        slots = json.loads(slots_json)
    except json.JSONDecodeError:
        slots = None
    if not isinstance(slots, list) or not all(isinstance(a, str) for a in slots):
        raise ConfigError(f'{WORKER_SLOTS_ENV} must be a JSON list of "host:port" strings; got {slots_json!r}.')
    workers = tf_config["cluster"].get(TaskType.WORKER, [])
    if slots[:len(workers)] != workers:
        raise ConfigError(f"{WORKER_SLOTS_ENV} must start with TF_CONFIG's workers {workers}; got {slots}.")
    return dict(tf_config, cluster=dict(tf_config["cluster"], **{TaskType.WORKER: slots}))


def parse_cluster(tf_config: Mapping[str, Any], collective: bool = False) -> ClusterInfo:
    """Turns a `TF_CONFIG` dict into a `ClusterInfo`, checking every rule.

    `collective`: the cluster of a strategy whose workers all-reduce (MultiWorkerMirroredStrategy): it may have
    no chief, and worker 0 is then the chief (as tf.estimator's distribute coordinator had it); it has no
    parameter servers.

    Raises:
        ConfigError: with the rule that was broken and how to fix it.
    """
    try:
        cluster, task_type, task_id, service = _fields(tf_config)
        if not cluster:
            if task_type not in (None, TaskType.WORKER, TaskType.CHIEF):
                raise _Invalid(f'task type {task_type!r} needs a "cluster"')
            return dataclasses.replace(LOCAL, service=service)
        if task_type == TaskType.EVALUATOR:
            return _evaluator(cluster, task_id, service)
        if collective and TaskType.PS in cluster:
            raise _Invalid('a MultiWorkerMirroredStrategy cluster all-reduces among its chief and workers and has no '
                           '"ps" tasks; remove them, or train with parameter servers (train_distribute None)')
        return _trainer_or_ps(cluster, task_type, task_id, service, tf_config.get("rpc_layer", "grpc"), collective)
    except _Invalid as problem:
        raise ConfigError(
            f"TF_CONFIG is invalid: {problem}. Received: {json.dumps(dict(tf_config))}. Expected a JSON object like "
            f'{_EXAMPLE}; an evaluator is not listed in "cluster" and uses {{"task": {{"type": "evaluator", '
            '"index": 0}}.'
        ) from None


def _fields(tf_config: Mapping[str, Any]) -> tuple[dict[str, list[str]], str | None, int, Mapping | None]:
    """The cluster (roles with no address left out), the task's type and index, and the service."""
    unknown = set(tf_config) - _KEYS
    if unknown:
        raise _Invalid(f"unknown top-level keys {sorted(unknown)}")
    cluster, task = tf_config.get("cluster") or {}, tf_config.get("task") or {}
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise _Invalid('"cluster" and "task" must be JSON objects')
    for job, addresses in cluster.items():
        if job not in TaskType.ALL:
            raise _Invalid(f'unknown role {job!r} in "cluster"; expected one of {list(TaskType.ALL)}')
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise _Invalid(f'cluster["{job}"] must be a list of "host:port" strings')
    service = tf_config.get("service")
    if service is not None and not isinstance(service, dict):
        raise _Invalid('"service" must be a JSON object (tf.estimator passes it on as RunConfig.service)')
    cluster = {job: addresses for job, addresses in cluster.items() if addresses}
    task_type = task.get("type")
    if cluster and task_type is None:
        raise _Invalid('"cluster" is set but "task" has no "type"')
    if cluster and task_type not in TaskType.ALL:
        raise _Invalid(f"unknown task type {task_type!r}; expected one of {list(TaskType.ALL)}")
    task_id = task.get("index", 0)
    if cluster and not is_int(task_id, minimum=0):
        raise _Invalid(f'task "index" must be a non-negative integer, got {task_id!r}')
    return cluster, task_type, task_id, service


def _evaluator(cluster: dict[str, list[str]], task_id: int, service: Mapping | None) -> ClusterInfo:
    if TaskType.EVALUATOR in cluster:
        raise _Invalid('the evaluator must not be listed in "cluster"')
    if task_id != 0:
        raise _Invalid(f"only one evaluator is supported; its index must be 0, got {task_id}")
    return ClusterInfo(cluster_spec=tf.train.ClusterSpec(cluster), task_type=TaskType.EVALUATOR, task_id=0, master="",
                       evaluation_master="", is_chief=False, num_ps_replicas=0, num_worker_replicas=0,
                       global_id_in_cluster=-1, service=service)


def _trainer_or_ps(cluster: dict[str, list[str]], task_type: str, task_id: int, service: Mapping | None,
                   rpc_layer: str, collective: bool = False) -> ClusterInfo:
    if task_type not in cluster:
        raise _Invalid(f'task type {task_type!r} is not a role in "cluster"')
    if task_id >= len(cluster[task_type]):
        raise _Invalid(f'task index {task_id} is out of range: cluster["{task_type}"] has '
                       f"{len(cluster[task_type])} address(es)")
    chiefless = collective and TaskType.CHIEF not in cluster and TaskType.MASTER not in cluster
    if chiefless:  # worker 0 leads
        chief_role, is_chief = TaskType.WORKER, task_type == TaskType.WORKER and task_id == 0
    else:
        chief_role = _chief_role(cluster)
        is_chief = task_type == chief_role
    return ClusterInfo(
        cluster_spec=tf.train.ClusterSpec(cluster),
        task_type=task_type,
        task_id=task_id,
        master=f"{rpc_layer}://{cluster[task_type][task_id]}" if task_type != TaskType.PS else "",
        evaluation_master="",
        is_chief=is_chief,
        num_ps_replicas=len(cluster.get(TaskType.PS, [])),
        num_worker_replicas=len(cluster.get(TaskType.WORKER, [])) + (0 if chiefless else 1),
        global_id_in_cluster=_global_id(cluster, chief_role, task_type, task_id),
        service=service,
    )


def _chief_role(cluster: dict[str, list[str]]) -> str:
    """"chief", or the legacy "master"; there must be exactly one of them, with one address."""
    if TaskType.CHIEF in cluster and TaskType.MASTER in cluster:
        raise _Invalid('use either "chief" or the legacy "master" role, not both')
    role = TaskType.CHIEF if TaskType.CHIEF in cluster else TaskType.MASTER
    if role not in cluster:
        raise _Invalid('a "cluster" must have exactly one "chief" task')
    if len(cluster[role]) != 1:
        raise _Invalid(f'"{role}" must have exactly one address')
    return role


def _global_id(cluster: dict[str, list[str]], chief_role: str, task_type: str, task_id: int) -> int:
    """The task's position when the chief comes first and the other roles follow in name order."""
    ordered = [chief_role] + sorted(job for job in cluster if job != chief_role)
    before = ordered[:ordered.index(task_type)]
    return sum(len(cluster[job]) for job in before) + task_id
