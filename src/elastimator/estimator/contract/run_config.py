"""`RunConfig`: how an Estimator runs, and where it sits in a cluster.

The cluster comes from `TF_CONFIG` (parsed by `tf_config.py`) and lives in a
`ClusterInfo` on the config, so the rest of the package asks the config, never
the environment.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import ConfigError
from elastimator.estimator import tf_internals
from elastimator.estimator.contract.tf_config import LOCAL_JOB_TF_CONFIG, ClusterInfo, TaskType, parse_cluster, read_tf_config

__all__ = ["LOCAL_JOB_TF_CONFIG", "RunConfig", "TaskType"]


class _UseDefault:
    """Marks a checkpoint frequency the user did not set."""

    def __repr__(self) -> str:
        return "<default>"


USE_DEFAULT: Any = _UseDefault()
_DEFAULT_SAVE_CHECKPOINTS_SECS = 600
_GRPC = "grpc://"


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


def with_logical_devices(config: tf.compat.v1.ConfigProto) -> tf.compat.v1.ConfigProto:
    """`config`, counting the devices of each kind that the process configured (tf.config's logical devices:
    two CPU devices made of one) where it does not count them itself. A session made with a config of its own
    sees one CPU otherwise, and a strategy's second replica lands on the first's device, where the replicas'
    collectives wait for each other forever."""
    configured = tf_internals.context.context().config.device_count
    missing = {kind: count for kind, count in configured.items() if kind not in config.device_count and count > 1}
    if not missing:
        return config
    counted = tf.compat.v1.ConfigProto()
    counted.CopyFrom(config)
    counted.device_count.update(missing)
    return counted


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """How an Estimator runs: checkpoints, summaries, sessions and cluster role.

    Every field of tf.estimator 2.15's `RunConfig` is accepted in the same
    order with the same default; elastimator's own fields are keyword-only.
    Cluster fields (`task_type`, `is_chief`, ...) are read from `TF_CONFIG`, or
    from `tf_config` when given.

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
    """A `tf.distribute` strategy of this process's devices: `MirroredStrategy(devices)` or
    `CentralStorageStrategy` trains a replica of the model on each device in sync, as tf.estimator did (the
    input_fn's batches are per replica; see estimator/graph/replicas.py). One replica (e.g. `OneDeviceStrategy`,
    or `MirroredStrategy()` on a machine with one device) trains as without a strategy."""
    device_fn: Callable[[Any], str] | None = None
    """Op -> device function; defaults to a replica device setter when the cluster has ps tasks."""
    protocol: str | None = None
    """Server protocol (None means "grpc")."""
    eval_distribute: Any = None
    """As `train_distribute`, for evaluation: each replica evaluates batches of its own, and the metrics are
    aggregated over them (`evaluate(steps=N)` counts steps of all replicas, N batches each). Prediction and
    export run on one device."""
    experimental_distribute: Any = None
    """Accepted for compatibility; must be None."""
    experimental_max_worker_delay_secs: int | None = None
    """Accepted for compatibility with tf.estimator."""
    session_creation_timeout_secs: int = 7200
    """How long a worker waits for the chief to initialize the model."""
    checkpoint_save_graph_def: bool = True
    """Whether checkpoints also write the graph (`graph.pbtxt`, `.meta`)."""
    _: dataclasses.KW_ONLY
    fuse_sparse_updates: bool = True
    """Apply v1 Adam's embedding (sparse) gradients with its fused dense kernel: the same arithmetic in
    fewer passes over each table (elastimator.estimator.graph.fused_updates). False keeps TensorFlow's ops."""
    steps_per_execution: int | None = None
    """Training steps per session call (TPUEstimator's `iterations_per_loop`). Above 1, hooks run once per call
    and see its last step; checkpoints, summaries and logs still land on their step intervals
    (elastimator.estimator.step.multi_step). None (the default): up to 20 steps per call, each call about 0.2 s, when
    every hook acts on the global step rather than on calls and the process trains alone (not in a cluster);
    else 1 (elastimator.estimator.step.steps_per_call)."""
    reuse_graphs: bool = True
    """`train`, `evaluate` and `predict` keep their graph and session for the next call of the same mode, where
    nothing the model is built from changed: the input_fn is called every call, the model_fn once per kept graph,
    and the newest checkpoint is restored into it where it does not hold it already
    (elastimator.estimator.loops.warm_graphs, kept_training). False builds every call's graph afresh, as
    tf.estimator did."""
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
        for name in ("fuse_sparse_updates", "reuse_graphs"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"RunConfig: {name} must be a bool; got {getattr(self, name)!r}.")
        steps = self.steps_per_execution
        if steps is not None and not is_int(steps, minimum=1):
            raise ConfigError(f"RunConfig: steps_per_execution must be an int >= 1, or None to size calls "
                              f"automatically; got {steps!r}.")
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
        object.__setattr__(self, "cluster", parse_cluster(tf_config, collective=is_collective(self.train_distribute)))

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
        """The user's session config, or the default for this role, with the process's logical devices."""
        config = self.session_config if self.session_config is not None else default_session_config(self.cluster)
        return with_logical_devices(config)

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

    def replace(self, **kwargs: Any) -> "RunConfig":
        """Returns a copy with the fields in `kwargs` changed; the cluster is kept, not re-read.

        Raises:
            ConfigError: for a name that is not a RunConfig field.
        """
        allowed = {f.name for f in dataclasses.fields(self) if f.init}
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            raise ConfigError(f"RunConfig.replace: unknown field(s) {unknown}; expected some of {sorted(allowed)}.")
        kwargs.setdefault("tf_config", self.tf_config)
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" not in kwargs:
            kwargs["save_checkpoints_secs"] = None if kwargs["save_checkpoints_steps"] is not None else USE_DEFAULT
        if "save_checkpoints_secs" in kwargs and "save_checkpoints_steps" not in kwargs:
            kwargs["save_checkpoints_steps"] = None if kwargs["save_checkpoints_secs"] is not None else USE_DEFAULT
        return dataclasses.replace(self, **kwargs)


IN_PROCESS_STRATEGIES = ("MirroredStrategy", "MirroredStrategyV1", "CentralStorageStrategy",
                         "CentralStorageStrategyV1")
"""The strategies whose replicas train in this process (estimator/graph/replicas.py), by class name (a subclass
counts as its base)."""
COLLECTIVE_STRATEGIES = ("CollectiveAllReduceStrategy", "CollectiveAllReduceStrategyV1")
"""MultiWorkerMirroredStrategy's classes (tf.distribute, its experimental alias, tf.compat.v1): replicas in
several processes (TF_CONFIG's chief and workers) that all-reduce their gradients."""


def _kinds(strategy: Any) -> set[str]:
    return {c.__name__ for c in type(strategy).__mro__}


def is_collective(strategy: Any) -> bool:
    """Whether `strategy` is a MultiWorkerMirroredStrategy (see COLLECTIVE_STRATEGIES)."""
    return strategy is not None and bool(_kinds(strategy) & set(COLLECTIVE_STRATEGIES))


def _check_strategy(name: str, strategy: Any) -> None:
    """A strategy of one replica runs as without one, on its device; several replicas run in sync where
    elastimator builds that (an in-process strategy); the rest are refused, saying what to use."""
    if strategy is None:
        return
    replicas = getattr(strategy, "num_replicas_in_sync", None)
    if not isinstance(replicas, int):
        raise ConfigError(f"RunConfig: {name} expected a tf.distribute.Strategy or None; got "
                          f"{type(strategy).__name__}.")
    kind = type(strategy).__name__
    if kind.startswith("TPUStrategy"):
        raise ConfigError(
            f"RunConfig: {name} is a {kind}; elastimator runs no TPU. Use MirroredStrategy over this machine's "
            "devices, or leave it None (TPUEstimator programs run with use_tpu=False).")
    if "ParameterServerStrategyV2" in _kinds(strategy):
        raise ConfigError(
            f"RunConfig: {name} is TF2's ParameterServerStrategy, which a Keras-era ClusterCoordinator drives; an "
            "Estimator trains with parameter servers from TF_CONFIG's \"ps\" tasks. Leave it None (or pass "
            "tf.compat.v1.distribute.experimental.ParameterServerStrategy, as tf.estimator took), and start the "
            "cluster with `elastimator launch` or TF_CONFIG.")
    if replicas == 1:
        return
    if is_collective(strategy) and name == "eval_distribute":
        raise ConfigError(
            f"RunConfig: eval_distribute is a {kind} over several processes; evaluation runs in one process (the "
            "evaluator task, or a process of its own). Use MirroredStrategy, or leave it None.")
    if not _kinds(strategy) & set(IN_PROCESS_STRATEGIES + COLLECTIVE_STRATEGIES):
        raise ConfigError(
            f"RunConfig: {name} is a {kind} with {replicas} replicas; elastimator trains several replicas with "
            "MirroredStrategy or CentralStorageStrategy in one process, MultiWorkerMirroredStrategy across "
            "processes, or with parameter servers (TF_CONFIG, `elastimator launch`). Use one of those.")


def _check_optional_int(name: str, value: Any) -> None:
    if value is None:
        return
    if not is_int(value, minimum=0):
        raise ConfigError(f"RunConfig: {name} must be a non-negative int or None; got {value!r}.")
