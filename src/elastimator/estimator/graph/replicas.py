"""Building the training or evaluation graph over the replicas of a tf.distribute strategy in this process, as
tf.estimator 2.15 built it for `RunConfig(train_distribute=..., eval_distribute=...)` (MirroredStrategy over
several devices, CentralStorageStrategy). Prediction and export run on one device, as in 2.15.

* The input_fn is called once per input pipeline, with its `input_context` if it takes one, and returns a
  Dataset whose batches are per replica: each replica takes a batch of its own, so one step trains on the
  input_fn's batch size times the number of replicas.
* model_fn is called once per replica, on that replica's device, in a thread of the strategy's, as it is written
  (2.15 let the strategy convert it with AutoGraph, which turned the errors it raised into StagingError; a
  graph-mode model_fn has no control flow on tensors to convert). Variables made
  under the strategy are mirrored (one copy per device, kept equal) or, with CentralStorageStrategy, kept on
  one device. A checkpoint holds each variable once, under its own name, so it restores with or without the
  strategy.
* A v1 optimizer divides each replica's loss by the number of replicas (where the loss is a mean), and the
  strategy sums the replicas' gradients before the update: a step over N replicas' batches is one step over
  the N batches together. The loss a step reports is the replicas' mean (their sum where no optimizer scaled
  them).
* The hooks and the scaffold come from the first replica's EstimatorSpec.
* Embedding variables (hash tables) are not mirrored by any strategy: making one under several replicas is
  an error that says to train them with parameter servers.
* MultiWorkerMirroredStrategy: each process of TF_CONFIG's chief and workers builds its replicas, its input_fn
  gets its pipeline's `input_context` (shard by `input_pipeline_id` of `num_input_pipelines`), and the
  gradients are all-reduced over the network through the server the strategy started. Every process
  initializes (or restores) its own copies of the variables, worker 0's initial values broadcast to all; the
  chief alone writes checkpoints and summaries.
* The default cross-device ops of a MirroredStrategy made outside a graph are collectives, which in a TF1
  session waited forever in the first step over CPU devices (tf.estimator 2.15 hung there): left at the
  default, the strategy built with is the same devices with the ops TensorFlow picks for a session (a
  reduction to one device over CPUs, NCCL over GPUs).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import tensorflow as tf

from elastimator import long_lived
from elastimator.errors import InputFnError, ModelFnError
from elastimator.estimator import tf_internals
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.run_config import RunConfig
from elastimator.estimator.contract.spec import EstimatorSpec
from elastimator.estimator.graph import calls, fused_updates, uneven_ends
from elastimator.estimator.graph.model_graph import ModelGraph, metrics_with_loss, seeded
from elastimator.estimator.step.training_step import StepInput


def replicas_of(strategy: Any) -> int:
    """How many replicas train in sync under `strategy` (None: one)."""
    return 1 if strategy is None else strategy.num_replicas_in_sync


def in_several_processes(strategy: Any) -> bool:
    """Whether `strategy`'s replicas span processes (MultiWorkerMirroredStrategy over TF_CONFIG's chief and
    workers): each process then builds its own replicas, and they all-reduce over the network."""
    return strategy is not None and tf_internals.in_multi_worker_mode(strategy)


def session_config(strategy: Any, config: tf.compat.v1.ConfigProto) -> tf.compat.v1.ConfigProto:
    """`config` with what a strategy over several processes needs of a session (its collectives' group leader,
    their scoped allocator); `config` unchanged for others."""
    if not in_several_processes(strategy):
        return config
    return tf_internals.update_config_proto(strategy, config)


def build_for(estimator, mode: str, input_fn: Callable, strategy: Any) -> ModelGraph:
    """Builds an Estimator's model for `mode` (TRAIN or EVAL) over `strategy`'s replicas (see the module doc)."""
    return build(model_fn=estimator.model_fn, params=estimator._params_for(mode),  # pylint: disable=protected-access
                 config=estimator.config, mode=mode, input_fn=input_fn, strategy=strategy)


def build(*, model_fn: Callable, params: dict | None, config: RunConfig, mode: str, input_fn: Callable,
          strategy: Any) -> ModelGraph:
    """Builds the model for `mode` into the default graph, model_fn once per replica of `strategy`.

    For TRAIN the spec's train op updates every replica and its loss is the replicas' (see the module doc); for
    EVAL each metric's update runs on every replica, and its value is what the strategy aggregates of them
    (tf.compat.v1.metrics and Keras metrics are made for that), with "loss" the mean of the replicas' losses.
    """
    if mode not in (ModeKeys.TRAIN, ModeKeys.EVAL):
        raise ValueError(f"replicas.build: {mode!r} is built on one device; only TRAIN and EVAL use a strategy.")
    long_lived.freeze_once()  # (see model_graph.build)
    strategy = _for_sessions(strategy)
    graph = tf.compat.v1.get_default_graph()
    with seeded(config.tf_random_seed), strategy.scope(), \
            tf_internals.scale_loss_for_estimator(strategy):
        global_step = tf.compat.v1.train.get_or_create_global_step()
        several = in_several_processes(strategy)
        iterator = strategy.make_input_fn_iterator(
            lambda context: _dataset(input_fn, mode, params or {}, config, context, strategy, padded=several))
        element, step_outputs = iterator.get_next(), {}
        if several:
            element, is_real = element
            before_model = [uneven_ends.every_worker_ended(is_real, strategy)]
        else:
            before_model = []
        if isinstance(element, StepInput):
            step_outputs = {name: _local(name, value, strategy) for name, value in element.step_outputs.items()}
            element = (element.features, element.labels)
        features, labels = calls.split(element, input_fn)
        specs: dict[int, EstimatorSpec] = {}
        lock = threading.Lock()

        @tf.autograph.experimental.do_not_convert
        def replica_fn(replica_features, replica_labels):
            with tf.control_dependencies(before_model):  # every worker's input ended: no replica trains
                replica_features, replica_labels = tf.nest.map_structure(
                    tf.identity, (replica_features, replica_labels))
            # The fused-update swap is seen only in the thread that enters it: each replica's thread enters it.
            with fused_updates.fused_sparse_adam(config.fuse_sparse_updates):
                spec = calls.call_model_fn(model_fn, replica_features, replica_labels, mode, params, config)
            replica = tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group)
            with lock:
                specs[int(replica)] = spec
            loss = uneven_ends.unless_empty(spec.loss, replica_features) if several else spec.loss
            if mode == ModeKeys.TRAIN:
                return loss, spec.train_op
            return loss, metrics_with_loss(spec)

        losses, results = strategy.extended.call_for_each_replica(replica_fn, args=(features, labels))
        if mode == ModeKeys.EVAL:
            reduction = tf.distribute.ReduceOp.MEAN
        elif getattr(graph, "_is_loss_scaled_by_optimizer", False):
            reduction = tf.compat.v1.distribute.get_loss_reduction()
        else:
            reduction = tf.distribute.ReduceOp.SUM
        loss = strategy.reduce(reduction, losses, axis=None)
        first = specs[min(specs)]  # this process's first replica (in sync-group order)
        if mode == ModeKeys.TRAIN:
            spec = EstimatorSpec(mode, loss=loss, train_op=strategy.group(results),
                                 training_hooks=first.training_hooks,
                                 training_chief_hooks=first.training_chief_hooks, scaffold=first.scaffold)
        else:
            metrics = {name: (_aggregated(name, value, strategy), strategy.group(update))
                       for name, (value, update) in results.items()}
            spec = EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics, evaluation_hooks=first.evaluation_hooks,
                                 scaffold=first.scaffold)
    if mode == ModeKeys.TRAIN:
        tf.compat.v1.summary.scalar("loss", loss)
    return ModelGraph(spec=spec, global_step=global_step, features=features, labels=labels,
                      input_hooks=(calls.DatasetInitializerHook(iterator),), replicas=replicas_of(strategy),
                      step_outputs=step_outputs)


def _aggregated(name: str, value: Any, strategy: Any) -> tf.Tensor:
    """A metric's value over all replicas: one tensor, which a metric made for strategies (tf.compat.v1.metrics,
    a Keras metric) computes across them. Per-replica values cannot be told apart from a mistake: refused."""
    if isinstance(value, tf.Tensor):
        return value
    raise ModelFnError(
        f"eval_metric_ops[{name!r}]: its value differs per replica under eval_distribute="
        f"{type(strategy).__name__}, so no one value stands for the evaluation. Make it with tf.compat.v1.metrics "
        "or a Keras metric object, whose value the strategy aggregates over the replicas.")


def _for_sessions(strategy: Any) -> Any:
    """The strategy to build with (see the module doc): the user's, unless it is a MirroredStrategy left on its
    default cross-device ops."""
    if tf_internals.on_default_cross_device_ops(strategy):
        devices = strategy.extended.worker_devices
        return tf.distribute.MirroredStrategy(devices, tf_internals.cross_device_ops.select_cross_device_ops(devices))
    return strategy


def _dataset(input_fn: Callable, mode: str, params: dict, config: RunConfig, context: tf.distribute.InputContext,
             strategy: Any, padded: bool) -> tf.data.Dataset:
    result = calls.input_fn_result(input_fn, mode, params, config, input_context=context)
    if not isinstance(result, tf.data.Dataset):
        raise InputFnError(
            f"input_fn returned {type(result).__name__}; with a {type(strategy).__name__} over "
            f"{strategy.num_replicas_in_sync} replicas it must return a tf.data.Dataset, whose batches each "
            "replica takes in turn (batch it by the batch size per replica).")
    return uneven_ends.padded(result) if padded else result


def _local(name: str, value: Any, strategy: Any) -> tf.Tensor:
    """A step output of this process's replicas: one replica's value, or several replicas' rows one after
    another (each replica trains a batch of its own, and the shard service's tag of each is a row its report
    hook reads)."""
    values = strategy.experimental_local_results(value)
    if len(values) == 1:
        return values[0]
    return tf.concat(values, axis=0, name=f"local_replicas/{name}")
