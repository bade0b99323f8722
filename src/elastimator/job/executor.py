"""The executor: a validated JobConf plus this process's role -> a running job.

It builds the input_fns from the data sets, the Estimator from
`classifier_class`, checkpoint and export settings from the conf, and calls
`train_and_evaluate` (every role of a cluster runs the same code; TF_CONFIG
decides what it does).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
from typing import Any, Mapping, Sequence

import tensorflow as tf

from elastimator.cluster.plan import EVALUATOR_ENV
from elastimator.data.dataset import DataSetInput, serving_input_receiver_fn
from elastimator.elastic.client import ShardClient
from elastimator.elastic.feed import ShardFeed, ShardReportHook, ShardRestoreHook, ShardSealListener
from elastimator.elastic.service_config import ServiceConfig
from elastimator.elastic.service import ShardServer, serve
from elastimator.elastic.sharded_input import ShardedInput
from elastimator.elastic.shards import ShardingSpec
from elastimator.errors import ConfError, ExportError
from elastimator.estimator import CheckpointDir, Estimator, RunConfig, StepHook, TaskType
from elastimator.job import data_quality, devices, evaluator_done
from elastimator.job.conf import ExporterConf, JobConf
from elastimator.job.progress import ProgressHook, first_step_hook, progress_file_hook
from elastimator.train_eval import eval_rounds
from elastimator.train_eval.exporters import Exporter
from elastimator.train_eval.policies import EveryNSeconds, EveryNSteps
from elastimator.train_eval.specs import EvalSpec, TrainSpec
from elastimator.train_eval.train_and_evaluate import train_and_evaluate, train_only

logger = logging.getLogger("elastimator")


@dataclasses.dataclass(frozen=True)
class JobResult:
    """What a job left behind."""

    model_dir: str
    global_step: int
    metrics: Mapping[str, Any] | None
    exports: Sequence[str]
    data_sets: Mapping[str, dict]
    """Per data set: "bad_records" skipped and "filled_fields" (column -> empty fields given the default)."""

    @property
    def bad_records(self) -> dict[str, int]:
        return {name: data["bad_records"] for name, data in self.data_sets.items()}


DEFAULT_SUMMARY_STEPS = 20
"""Summaries this often (unless log_steps is smaller) give `report` and TensorBoard a curve, not a few points."""


def run_config(conf: JobConf, tf_config: Mapping | None = None) -> RunConfig:
    """The RunConfig of a conf's job, for this process's place in the cluster `tf_config` (or TF_CONFIG) names."""
    config = RunConfig(
        model_dir=conf.model_dir,
        tf_random_seed=conf.tf_random_seed,
        save_summary_steps=conf.summary_steps or min(conf.log_steps, DEFAULT_SUMMARY_STEPS),
        log_step_count_steps=conf.log_steps,
        keep_checkpoint_max=conf.keep_checkpoint_max,
        steps_per_execution=conf.steps_per_execution,
        **({"save_checkpoints_steps": conf.save_steps} if conf.save_steps else {}),
        **({"save_checkpoints_secs": conf.save_secs} if conf.save_secs else {}),
        tf_config=tf_config,
    )
    if conf.strategy == "parameter_server":
        trainers = config.cluster_spec.as_dict() if config.cluster.is_distributed else {}
        if trainers.get(TaskType.WORKER) and not trainers.get(TaskType.PS):
            raise ConfError(
                f"conf {conf.name} trains with parameter servers (strategy 'parameter_server'), but TF_CONFIG's "
                "cluster has workers and no \"ps\" tasks: each worker would train a model of its own. Add ps tasks, "
                "or set strategy 'multi_worker_mirrored' to all-reduce among the chief and workers.")
        return config
    if conf.strategy == "multi_worker_mirrored":
        return _multi_worker(conf, config, tf_config)
    if config.cluster.is_distributed:
        raise ConfError(f"conf {conf.name}: strategy 'mirrored' trains in one process, on its devices, but this "
                        "process is one task of a cluster (TF_CONFIG). Run it alone (`elastimator run`), or set "
                        "strategy 'multi_worker_mirrored' or 'parameter_server' for a cluster.")
    strategy = devices.mirrored(devices.local_devices(conf.replicas_per_worker))
    return config.replace(train_distribute=strategy, eval_distribute=strategy)


def _multi_worker(conf: JobConf, config: RunConfig, tf_config: Mapping | None) -> RunConfig:
    """The RunConfig of one task of a synchronous job: the chief and workers all-reduce (the strategy joins them
    through TF_CONFIG's cluster, which has no "ps"); an evaluator evaluates alone, on one device."""
    if config.task_type == TaskType.EVALUATOR:
        return config
    if config.cluster_spec.as_dict().get(TaskType.PS):
        raise ConfError(f"conf {conf.name}: strategy 'multi_worker_mirrored' all-reduces among the chief and "
                        "workers and has no parameter servers, but TF_CONFIG's cluster lists \"ps\" tasks. Launch "
                        "it without them (`elastimator launch` does, for this strategy), or set strategy "
                        "'parameter_server'.")
    resolver = None  # the cluster TF_CONFIG names
    if not config.cluster.is_distributed:  # `elastimator run` alone: one worker, this process
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec({}))
    elif tf_config is not None:  # this cluster, not the environment's
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            config.cluster_spec, task_type=config.task_type, task_id=config.task_id, rpc_layer="grpc")
    strategy = devices.multi_worker_mirrored(resolver, devices.local_devices(conf.replicas_per_worker))
    return config.replace(train_distribute=strategy)


def build_estimator(conf: JobConf, config: RunConfig) -> Estimator:
    """The conf's classifier: an Estimator subclass instance, or an Estimator over a model_fn.

    A subclass gets `model_dir`, `config` and `params` by name when its `__init__`
    has parameters of those names (Estimator's own does), and otherwise in that
    order, as DLRover's trainer passed them: `classifier_class(model_dir, config, params)`.
    """
    params = dict(conf.params) or None
    cls = conf.classifier_class
    if not inspect.isclass(cls):
        return Estimator(cls, model_dir=config.model_dir, config=config, params=params)
    offered = {"model_dir": config.model_dir, "config": config, "params": params}
    if cls.__init__ is Estimator.__init__:  # a subclass that only defines its model_fn method
        return cls(None, **offered)
    signature = inspect.signature(cls)
    if set(offered) <= set(signature.parameters):
        return cls(**offered)
    try:
        signature.bind(*offered.values())
    except TypeError as e:
        raise ConfError(
            f"conf: 'classifier_class' {cls.__name__}{signature} cannot be constructed as "
            f"{cls.__name__}(model_dir, config, params) ({e}). Give its __init__ the parameters "
            "(model_dir, config=None, params=None), as DLRover's trainer expects."
        ) from None
    return cls(*offered.values())


def build_exporter(conf: JobConf) -> Exporter:
    if isinstance(conf.exporter, Exporter):
        return conf.exporter
    exporter: ExporterConf = conf.exporter
    return exporter.build(serving_input_receiver_fn(conf.train_set.columns))


def _total_steps(conf: JobConf, train: DataSetInput) -> int | None:
    if conf.max_steps:
        return conf.max_steps
    spec = train.spec
    reader = spec.reader
    if spec.epoch is None or not hasattr(reader, "data_nums"):
        return None
    per_epoch = -(-reader.data_nums // spec.batch_size)
    return per_epoch * spec.epoch


def _raise_input_failure(inputs: Sequence[DataSetInput], error: tf.errors.OpError):
    for data in inputs:
        if data.failure is not None:
            raise data.failure from None
    raise error


@dataclasses.dataclass
class _Elastic:
    """This process's part in elastic sharding: the feed, hooks and listeners, and (chief) the server."""

    feed: ShardFeed
    hooks: list
    listeners: list
    server: ShardServer | None


def _elastic(conf: JobConf, config: RunConfig, service: ServiceConfig) -> _Elastic:
    spec = conf.train_set
    server = None
    if config.is_chief and not service.standalone:
        host, _, port = (service.listen or service.address).rpartition(":")
        server = serve(config.model_dir, service.token, host, int(port), service.worker_timeout_secs,
                       keep_seals=conf.keep_checkpoint_max or None, report_port=service.report_port)
    worker = f"{config.task_type}-{config.task_id}"
    if server is not None:
        client = ShardClient.in_process(server.service, worker)
    else:
        client = ShardClient(service.address, service.token, worker=worker)
    dataset = ShardingSpec(name=spec.name, size=spec.reader.data_nums, shard_size=spec.shard_size or 10 * spec.batch_size,
                          epochs=spec.epoch or 1_000_000, shuffle=spec.shuffle, seed=conf.tf_random_seed or 0)
    feed = ShardFeed(client, dataset, synchronous=conf.strategy == "multi_worker_mirrored").start()
    hooks: list = [ShardReportHook.step_hook(feed)]
    listeners: list = []
    if config.is_chief:
        # Live workers reconnect within a second or two; one still silent after this is probably dead.
        wait_secs = min(service.worker_timeout_secs, 10.0)
        hooks.append(ShardRestoreHook(client, config.model_dir, wait_secs=wait_secs))
        listeners.append(ShardSealListener(client))
    return _Elastic(feed, hooks, listeners, server)


def _kubernetes_autoscaler(config: RunConfig):
    """The chief's worker autoscaler on Kubernetes, running, where the manifest asked for one (None elsewhere)."""
    from elastimator.cluster import k8s_autoscale, k8s_scaler

    settings = k8s_autoscale.Settings.from_env()
    if settings is None or not config.is_chief:
        return None
    logger.info("Autoscaling %s %s/%s between %d and %d worker(s), every %.0fs.", settings.api, settings.namespace,
                settings.name, settings.min_workers, settings.max_workers, settings.every_secs)
    return k8s_scaler.Autoscaler(settings, config.model_dir).start()


def _chief_evaluates_at_the_end(config: RunConfig) -> bool:
    """Whether this process is the chief of a cluster without an evaluator task, which evaluates and exports the
    final model itself (DLRover's trainer did; tf.estimator's chief left both to an evaluator)."""
    if not (config.cluster.is_distributed and config.is_chief):
        return False
    evaluator = os.environ.get(EVALUATOR_ENV)
    if evaluator is None:
        logger.info("The evaluator task evaluates and exports this job's model. If the job has none, set %s=0 so "
                    "that the chief does both once training ends.", EVALUATOR_ENV)
    return evaluator == "0"


def _final_round(conf: JobConf, config: RunConfig, eval_spec: EvalSpec) -> tuple[dict, list]:
    """The chief's evaluation and export of the final checkpoint, on this machine alone (the parameter servers
    are done). A failure here would repeat on a restart, so it is an ExportError that ends the job."""
    local = build_estimator(conf, config.replace(tf_config={}))
    checkpoint = local.latest_checkpoint()
    try:
        final = eval_rounds.evaluation_round(local, eval_spec, checkpoint, final=True)
    except Exception as error:  # pylint: disable=broad-except  # any failure of the user's code, named below
        raise ExportError(
            f"training finished and its final checkpoint {checkpoint} is kept, but evaluating and exporting it "
            f"failed: {type(error).__name__}: {str(error).rstrip('.')}. Fix the cause, then run `elastimator "
            f"export CONF --model-dir {config.model_dir}`, or launch again (training resumes at its end)."
        ) from error
    return final.metrics, final.export_results


def run_job(conf: JobConf, *, tf_config: Mapping | None = None, show_progress: bool = True,
            extra_hooks: Sequence = ()) -> JobResult:
    """Runs this process's part of the job described by `conf`.

    With ELASTIMATOR_SHARD_SERVICE set, the training data is sharded by the
    job's shard service (hosted by the chief) instead of read whole by each process.
    """
    config = run_config(conf, tf_config)
    estimator = build_estimator(conf, config)
    service = ServiceConfig.from_env()
    elastic = None
    if service is not None and config.task_type not in (TaskType.PS, TaskType.EVALUATOR):
        if conf.strategy == "mirrored":
            raise ConfError(f"conf {conf.name}: strategy 'mirrored' reads its data whole in one process; the shard "
                            "service (ELASTIMATOR_SHARD_SERVICE) shards it over processes. Unset it, or set strategy "
                            "'multi_worker_mirrored' or 'parameter_server'.")
        elastic = _elastic(conf, config, service)
    train = ShardedInput(conf.train_set, elastic.feed) if elastic else DataSetInput(conf.train_set)
    evaluation = DataSetInput(conf.eval_set) if conf.eval_set is not None else None
    inputs = [d for d in (train, evaluation) if d is not None]
    if config.task_type != TaskType.PS:
        for data in inputs:
            data.check()
    hooks = list(extra_hooks) + (elastic.hooks if elastic else [])
    listeners = elastic.listeners if elastic else []
    if show_progress and config.is_chief:
        total = _total_steps(conf, train)
        hooks.append(StepHook(lambda step: ProgressHook(step, total)))
    if (progress := progress_file_hook()) is not None and config.task_type != TaskType.EVALUATOR:
        hooks.append(progress)
    if (stepped := first_step_hook(estimator.model_dir, _task_name(config))) is not None:
        hooks.append(stepped)
    exporter = build_exporter(conf)
    metrics, exports = None, []
    train_spec = TrainSpec(train, max_steps=conf.max_steps, hooks=hooks, saving_listeners=listeners)
    scaler = _kubernetes_autoscaler(config)
    try:
        if evaluation is None:
            exports = train_only(estimator, train_spec, exporters=[exporter])
        else:
            policy = EveryNSeconds(conf.eval_throttle_secs)
            if conf.eval_every_steps:
                policy = EveryNSteps(conf.eval_every_steps) if not conf.eval_throttle_secs else \
                    EveryNSteps(conf.eval_every_steps) | policy
            eval_spec = EvalSpec(evaluation, steps=conf.eval_steps, exporters=[exporter], policy=policy,
                                 start_delay_secs=conf.eval_start_delay_secs, throttle_secs=conf.eval_throttle_secs)
            metrics, exports = train_and_evaluate(estimator, train_spec, eval_spec)
            if _chief_evaluates_at_the_end(config):
                metrics, exports = _final_round(conf, config, eval_spec)
    except tf.errors.OpError as error:
        _raise_input_failure(inputs, error)
    finally:
        if scaler is not None:
            scaler.stop()
        if elastic is not None:
            elastic.feed.stop()
            if elastic.server is not None:
                elastic.server.drain(timeout_secs=max(60.0, 3 * elastic.server.service.worker_timeout_secs))
                elastic.server.stop()
    step = CheckpointDir(estimator.model_dir).newest_step()
    if evaluation is not None:
        _meet_the_evaluator(config, estimator.model_dir, step)
    report = data_quality.of_inputs(inputs)
    if config.task_type != TaskType.PS:
        data_quality.write(estimator.model_dir, _task_name(config), report)
    return JobResult(model_dir=estimator.model_dir, global_step=step, metrics=metrics,
                     exports=[p.decode() if isinstance(p, bytes) else p for p in exports], data_sets=report)


def _meet_the_evaluator(config: RunConfig, model_dir: str, step: int | None) -> None:
    """The evaluator marks its final round done; a chief given evaluator_done.WAIT_ENV waits for it."""
    if config.task_type == TaskType.EVALUATOR:
        evaluator_done.mark(model_dir, step)
    elif config.is_chief and step is not None and os.environ.get(evaluator_done.WAIT_ENV):
        evaluator_done.wait(model_dir, step, float(os.environ[evaluator_done.WAIT_ENV]))


def _task_name(config: RunConfig) -> str:
    return f"{config.task_type}-{config.task_id}" if config.cluster.cluster_spec.as_dict() else "local"
