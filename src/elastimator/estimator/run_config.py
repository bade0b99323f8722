"""`RunConfig`: how an Estimator runs, and where it sits in a cluster.

This is the only module that reads the `TF_CONFIG` environment variable. The
parsed cluster lives in a `ClusterInfo` on the config, so the rest of the
package asks the config, never the environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Mapping

import tensorflow as tf

from elastimator.errors import ConfigError


class TaskType:
    """Roles a process can have in a `TF_CONFIG` cluster."""

    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"
    MASTER = "master"

    ALL = (CHIEF, WORKER, PS, EVALUATOR, MASTER)


class _UseDefault:
    """Marks a checkpoint frequency the user did not set."""

    def __repr__(self) -> str:
        return "<default>"


USE_DEFAULT: Any = _UseDefault()
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600
_GRPC = "grpc://"


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


_LOCAL = ClusterInfo(
    cluster_spec=tf.train.ClusterSpec({}),
    task_type=TaskType.WORKER,
    task_id=0,
    master="",
    evaluation_master="",
    is_chief=True,
    num_ps_replicas=0,
    num_worker_replicas=1,
    global_id_in_cluster=0,
    service=None,
)


def _tf_config_error(problem: str, tf_config: Mapping[str, Any]) -> ConfigError:
    example = (
        '{"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"], '
        '"ps": ["localhost:2224"]}, "task": {"type": "worker", "index": 0}}'
    )
    return ConfigError(
        f"TF_CONFIG is invalid: {problem}. Received: {json.dumps(dict(tf_config))}. "
        f"Expected a JSON object like {example}; an evaluator is not listed in "
        '"cluster" and uses {"task": {"type": "evaluator", "index": 0}}.'
    )


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


WORKER_SLOTS_ENV = "ELASTIMATOR_WORKER_SLOTS"


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


LOCAL_JOB_TF_CONFIG = {"cluster": {"ps": [], "worker": []}, "task": {"type": "chief", "index": 0}}
"""What `elastimator run` puts in TF_CONFIG when it is unset: this one process is the chief; there are no
parameter servers and no other workers. Confs written for DLRover's trainer (which always set TF_CONFIG) size
their models from it, e.g. `len(TF_CONFIG["cluster"]["ps"])` partitions."""


def parse_cluster(tf_config: Mapping[str, Any]) -> ClusterInfo:
    """Turns a `TF_CONFIG` dict into a `ClusterInfo`, checking every rule.

    Raises:
        ConfigError: with the rule that was broken and how to fix it.
    """
    unknown = set(tf_config) - {"cluster", "task", "environment", "rpc_layer", "session_master", "service"}
    if unknown:
        raise _tf_config_error(f"unknown top-level keys {sorted(unknown)}", tf_config)
    cluster = tf_config.get("cluster") or {}
    task = tf_config.get("task") or {}
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise _tf_config_error('"cluster" and "task" must be JSON objects', tf_config)
    for job, addresses in cluster.items():
        if job not in TaskType.ALL:
            raise _tf_config_error(
                f'unknown role {job!r} in "cluster"; expected one of {list(TaskType.ALL)}', tf_config
            )
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise _tf_config_error(f'cluster["{job}"] must be a list of "host:port" strings', tf_config)
    cluster = {job: addresses for job, addresses in cluster.items() if addresses}  # a role with no task is absent
    service = tf_config.get("service")
    if service is not None and not isinstance(service, dict):
        raise _tf_config_error('"service" must be a JSON object (tf.estimator passes it on as RunConfig.service)',
                               tf_config)
    task_type = task.get("type")
    if not cluster:
        if task_type not in (None, TaskType.WORKER, TaskType.CHIEF):
            raise _tf_config_error(f'task type {task_type!r} needs a "cluster"', tf_config)
        return _LOCAL if service is None else dataclasses.replace(_LOCAL, service=service)
    if task_type is None:
        raise _tf_config_error('"cluster" is set but "task" has no "type"', tf_config)
    if task_type not in TaskType.ALL:
        raise _tf_config_error(f"unknown task type {task_type!r}; expected one of {list(TaskType.ALL)}", tf_config)
    task_id = task.get("index", 0)
    if not isinstance(task_id, int) or isinstance(task_id, bool) or task_id < 0:
        raise _tf_config_error(f'task "index" must be a non-negative integer, got {task_id!r}', tf_config)
    spec = tf.train.ClusterSpec(cluster)
    workers = len(cluster.get(TaskType.WORKER, []))
    num_ps = len(cluster.get(TaskType.PS, []))

    if task_type == TaskType.EVALUATOR:
        if TaskType.EVALUATOR in cluster:
            raise _tf_config_error('the evaluator must not be listed in "cluster"', tf_config)
        if task_id != 0:
            raise _tf_config_error(f"only one evaluator is supported; its index must be 0, got {task_id}", tf_config)
        return ClusterInfo(
            cluster_spec=spec, task_type=task_type, task_id=0, master="", evaluation_master="",
            is_chief=False, num_ps_replicas=0, num_worker_replicas=0, global_id_in_cluster=-1,
            service=service,
        )
    if task_type not in cluster:
        raise _tf_config_error(f'task type {task_type!r} is not a role in "cluster"', tf_config)
    if task_id >= len(cluster[task_type]):
        raise _tf_config_error(
            f'task index {task_id} is out of range: cluster["{task_type}"] has '
            f"{len(cluster[task_type])} address(es)",
            tf_config,
        )
    chief_role = TaskType.CHIEF if TaskType.CHIEF in cluster else TaskType.MASTER
    if chief_role not in cluster:
        raise _tf_config_error('a "cluster" must have exactly one "chief" task', tf_config)
    if len(cluster[chief_role]) != 1:
        raise _tf_config_error(f'"{chief_role}" must have exactly one address', tf_config)
    if TaskType.CHIEF in cluster and TaskType.MASTER in cluster:
        raise _tf_config_error('use either "chief" or the legacy "master" role, not both', tf_config)
    ordered = [chief_role] + sorted(j for j in cluster if j != chief_role)
    global_id = 0
    for job in ordered:
        if job == task_type:
            global_id += task_id
            break
        global_id += len(cluster[job])
    rpc_layer = tf_config.get("rpc_layer", "grpc")
    address = cluster[task_type][task_id]
    return ClusterInfo(
        cluster_spec=spec,
        task_type=task_type,
        task_id=task_id,
        master=f"{rpc_layer}://{address}" if task_type != TaskType.PS else "",
        evaluation_master="",
        is_chief=task_type == chief_role,
        num_ps_replicas=num_ps,
        num_worker_replicas=1 + workers,
        global_id_in_cluster=global_id,
        service=service,
    )


def default_session_config(cluster: ClusterInfo) -> tf.compat.v1.ConfigProto:
    """The session config an Estimator uses when the user gives none.

    Soft placement on; in a parameter-server cluster, each trainer only talks to
    the parameter servers and itself (device filters), so session creation does
    not wait for every other task to come up.
    """
    rewrite = tf.compat.v1.GraphOptions().rewrite_options
    rewrite.meta_optimizer_iterations = rewrite.ONE
    config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    config.graph_options.rewrite_options.CopyFrom(rewrite)
    if cluster.is_distributed and cluster.task_type in (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER):
        config.device_filters.extend(["/job:ps", f"/job:{cluster.task_type}/task:{cluster.task_id}"])
    return config


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How an Estimator runs: checkpoints, summaries, sessions and cluster role.

    Every field of tf.estimator 2.15's `RunConfig` is accepted with the same
    default. Cluster fields (`task_type`, `is_chief`, ...) are read from
    `TF_CONFIG`, or from `tf_config` when given.

    Example:
        >>> config = RunConfig(save_checkpoints_steps=500, keep_checkpoint_max=3)
        >>> config.save_checkpoints_secs is None
        True
    """

    model_dir: str | None = None
    """Where checkpoints, events and exports go; the Estimator's own argument wins if both are set."""
    tf_random_seed: int | None = None
    """Graph-level random seed, set in every graph the Estimator builds."""
    save_summary_steps: int | None = 100
    """Write training summaries every this many steps (None or 0: never)."""
    save_checkpoints_steps: int | None = USE_DEFAULT
    """Checkpoint every N steps. Exclusive with `save_checkpoints_secs`."""
    save_checkpoints_secs: int | None = USE_DEFAULT
    """Checkpoint every N seconds; 600 when neither frequency is set."""
    session_config: tf.compat.v1.ConfigProto | None = None
    """Session options; a sensible default (with device filters in a cluster) when None."""
    keep_checkpoint_max: int | None = 5
    """Newest checkpoints to keep; None or 0 keeps all."""
    keep_checkpoint_every_n_hours: float = 10000
    """Also keep one checkpoint per this many hours of training."""
    log_step_count_steps: int | None = 100
    """Log loss and steps/s every N steps (None or 0: never)."""
    train_distribute: Any = None
    """A `tf.distribute` strategy with one replica (e.g. `MirroredStrategy()` on a machine with one device)
    trains on that device, as tf.estimator did; several replicas are refused (elastimator distributes with
    parameter servers: see TF_CONFIG and `elastimator launch`)."""
    device_fn: Callable[[Any], str] | None = None
    """Op -> device function; defaults to a replica device setter when the cluster has ps tasks."""
    protocol: str | None = None
    """Server protocol (None means "grpc")."""
    eval_distribute: Any = None
    """As `train_distribute`, for evaluation."""
    experimental_distribute: Any = None
    """Accepted for compatibility; must be None."""
    experimental_max_worker_delay_secs: int | None = None
    """Accepted for compatibility with tf.estimator."""
    session_creation_timeout_secs: int = 7200
    """How long a worker waits for the chief to initialize the model."""
    checkpoint_save_graph_def: bool = True
    """Whether checkpoints also write the graph (`graph.pbtxt`, `.meta`)."""
    fuse_sparse_updates: bool = True
    """Apply v1 Adam's embedding (sparse) gradients with its fused dense kernel: the same arithmetic in
    fewer passes over each table (elastimator.estimator.fused_updates). False keeps TensorFlow's ops."""
    steps_per_execution: int = 1
    """Training steps per session call (TPUEstimator's `iterations_per_loop`). Above 1, hooks run once per call
    and see its last step; checkpoints, summaries and logs still land on their step intervals
    (elastimator.estimator.multi_step)."""
    tf_config: Mapping[str, Any] | None = dataclasses.field(default=None, repr=False)
    """TF_CONFIG as a dict; None reads the environment variable once, here."""
    cluster: ClusterInfo = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        steps, secs = self.save_checkpoints_steps, self.save_checkpoints_secs
        if steps is USE_DEFAULT and secs is USE_DEFAULT:
            steps, secs = None, _DEFAULT_SAVE_CHECKPOINTS_SECS
        elif steps is USE_DEFAULT:
            steps = None
        elif secs is USE_DEFAULT:
            secs = None
        if steps is not None and secs is not None:
            raise ConfigError(
                "RunConfig: save_checkpoints_steps and save_checkpoints_secs are exclusive; "
                f"got steps={steps} and secs={secs}. Set only one of them."
            )
        object.__setattr__(self, "save_checkpoints_steps", steps)
        object.__setattr__(self, "save_checkpoints_secs", secs)
        for name in ("save_summary_steps", "save_checkpoints_steps", "save_checkpoints_secs",
                     "keep_checkpoint_max", "log_step_count_steps", "tf_random_seed"):
            _check_optional_int(name, getattr(self, name))
        if self.keep_checkpoint_every_n_hours <= 0:
            raise ConfigError(
                f"RunConfig: keep_checkpoint_every_n_hours must be > 0; got {self.keep_checkpoint_every_n_hours}."
            )
        if not isinstance(self.fuse_sparse_updates, bool):
            raise ConfigError(f"RunConfig: fuse_sparse_updates must be a bool; got {self.fuse_sparse_updates!r}.")
        steps = self.steps_per_execution
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ConfigError(f"RunConfig: steps_per_execution must be an int >= 1; got {steps!r}.")
        if self.device_fn is not None and not callable(self.device_fn):
            raise ConfigError(f"RunConfig: device_fn must be callable(op) -> device string; got {self.device_fn!r}.")
        if self.session_config is not None and not isinstance(self.session_config, tf.compat.v1.ConfigProto):
            raise ConfigError(
                "RunConfig: session_config must be a tf.compat.v1.ConfigProto; "
                f"got {type(self.session_config).__name__}."
            )
        if self.protocol not in (None, "grpc", "grpc+verbs"):
            raise ConfigError(f"RunConfig: protocol must be None, 'grpc' or 'grpc+verbs'; got {self.protocol!r}.")
        for name in ("train_distribute", "eval_distribute"):
            _check_strategy(name, getattr(self, name))
        if self.experimental_distribute is not None:
            raise ConfigError(
                "RunConfig: experimental_distribute (tf.distribute strategies) is not supported; elastimator "
                "distributes training with parameter servers from TF_CONFIG. Leave it None."
            )
        tf_config = read_tf_config() if self.tf_config is None else dict(self.tf_config)
        object.__setattr__(self, "tf_config", tf_config)
        object.__setattr__(self, "cluster", parse_cluster(tf_config))

    # The cluster, as tf.estimator's RunConfig exposed it.
    cluster_spec = property(lambda self: self.cluster.cluster_spec)
    task_type = property(lambda self: self.cluster.task_type)
    task_id = property(lambda self: self.cluster.task_id)
    master = property(lambda self: self.cluster.master)
    evaluation_master = property(lambda self: self.cluster.evaluation_master)
    is_chief = property(lambda self: self.cluster.is_chief)
    num_ps_replicas = property(lambda self: self.cluster.num_ps_replicas)
    num_worker_replicas = property(lambda self: self.cluster.num_worker_replicas)
    global_id_in_cluster = property(lambda self: self.cluster.global_id_in_cluster)
    service = property(lambda self: self.cluster.service)

    def effective_session_config(self) -> tf.compat.v1.ConfigProto:
        """The user's session config, or the default for this role."""
        return self.session_config if self.session_config is not None else default_session_config(self.cluster)

    def effective_device_fn(self) -> Callable[[Any], str] | None:
        """The user's device_fn, or a replica device setter when there are ps tasks."""
        if self.device_fn is not None:
            return self.device_fn
        if self.cluster.num_ps_replicas > 0 and self.cluster.is_distributed:
            return tf.compat.v1.train.replica_device_setter(
                ps_tasks=self.cluster.num_ps_replicas,
                worker_device=f"/job:{self.cluster.task_type}/task:{self.cluster.task_id}",
                merge_devices=True,
                cluster=self.cluster.cluster_spec,
            )
        return None

    def replace(self, **changes: Any) -> "RunConfig":
        """Returns a copy with `changes` applied; the cluster is kept, not re-read.

        Raises:
            ConfigError: for a name that is not a RunConfig field.
        """
        allowed = {f.name for f in dataclasses.fields(self) if f.init}
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise ConfigError(f"RunConfig.replace: unknown field(s) {unknown}; expected some of {sorted(allowed)}.")
        changes.setdefault("tf_config", self.tf_config)
        if "save_checkpoints_steps" in changes and "save_checkpoints_secs" not in changes:
            changes["save_checkpoints_secs"] = None if changes["save_checkpoints_steps"] is not None else USE_DEFAULT
        if "save_checkpoints_secs" in changes and "save_checkpoints_steps" not in changes:
            changes["save_checkpoints_steps"] = None if changes["save_checkpoints_secs"] is not None else USE_DEFAULT
        return dataclasses.replace(self, **changes)


def _check_strategy(name: str, strategy: Any) -> None:
    """A strategy of one replica runs as plain training on its device; more replicas are refused."""
    if strategy is None:
        return
    replicas = getattr(strategy, "num_replicas_in_sync", None)
    if not isinstance(replicas, int):
        raise ConfigError(f"RunConfig: {name} expected a tf.distribute.Strategy or None; got "
                          f"{type(strategy).__name__}.")
    if replicas != 1:
        raise ConfigError(
            f"RunConfig: {name} is a {type(strategy).__name__} with {replicas} replicas; elastimator trains one "
            "replica per process and distributes with parameter servers (TF_CONFIG, `elastimator launch`). Use "
            "one device (e.g. CUDA_VISIBLE_DEVICES=0), or a parameter-server cluster for several."
        )


def _check_optional_int(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"RunConfig: {name} must be a non-negative int or None; got {value!r}.")
