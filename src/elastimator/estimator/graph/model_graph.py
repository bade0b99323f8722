"""Building the graph for one mode: input_fn, then model_fn, then checks."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import sys
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from elastimator import long_lived
from elastimator.embedding import engine as embedding_engine
from elastimator.estimator import tf_internals
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.run_config import RunConfig
from elastimator.estimator.contract.spec import EstimatorSpec
from elastimator.estimator.graph import calls, fused_updates, keras_traps, state_updates

@dataclasses.dataclass(frozen=True)
class ModelGraph:
    """The current graph's model for one mode, ready for a session."""

    spec: EstimatorSpec
    global_step: tf.Variable
    features: Any
    labels: Any
    input_hooks: tuple = ()
    step_outputs: dict = dataclasses.field(default_factory=dict)
    """Per-batch tensors the input declared for hooks (`training_step.StepInput`), by name."""
    replicas: int = 1
    """How many replicas of the model a step trains in sync (a train_distribute strategy's, graph/replicas.py)."""


@contextlib.contextmanager
def seeded(seed: int | None):
    """Seeds the graph, Python's and NumPy's generators, and whichever Keras is loaded, while a graph builds.

    Keras initializers draw their own seeds (from Python's `random` unless
    Keras was seeded), so a graph-level seed alone would not make two runs
    with the same `tf_random_seed` start from the same weights. A Keras that a
    model_fn imports later draws from the seeded `random` too; importing both
    Keras versions here would cost every seeded job about 200 MB. Python's and
    NumPy's generators, and the Keras seed state (each Keras keeps it per
    thread), are given back as they were once the graph is built: the
    program's own draws do not depend on how often it trained.
    """
    if seed is None:
        yield
        return
    python_state, numpy_state = random.getstate(), np.random.get_state()
    restores = [_seed_keras(name, seed) for name in ("keras", "tf_keras")
                if hasattr(sys.modules.get(name), "utils")]
    random.seed(seed)
    np.random.seed(seed)
    tf.compat.v1.set_random_seed(seed)
    try:
        yield
    finally:
        for restore in restores:
            restore()
        random.setstate(python_state)
        np.random.set_state(numpy_state)


def _seed_keras(name: str, seed: int) -> Callable[[], None]:
    """Seeds a loaded Keras (`keras` or `tf_keras`); returns what puts its seed state back. (Inside the graph
    being built, its `tf.random.set_seed` seeds that graph only.)"""
    # pylint: disable=import-outside-toplevel  (each Keras is imported only where the program loaded it)
    if name == "keras":
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator

        saved = {key: global_state.get_global_attribute(key)
                 for key in ("global_random_seed", seed_generator.GLOBAL_SEED_GENERATOR)}

        def restore() -> None:
            for key, value in saved.items():
                global_state.set_global_attribute(key, value)
    else:
        generators = tf_internals.tf_keras_seed_generators()
        saved_generator = getattr(generators, "generator", None)

        def restore() -> None:
            generators.generator = saved_generator
    sys.modules[name].utils.set_random_seed(seed)
    return restore


LOSS_METRIC = "loss"


def metrics_with_loss(spec: EstimatorSpec) -> dict:
    """An EVAL spec's metric ops, with the mean of its loss over the batches as "loss" unless it has one."""
    metrics = dict(spec.eval_metric_ops)
    if LOSS_METRIC not in metrics:
        metrics[LOSS_METRIC] = tf.compat.v1.metrics.mean(spec.loss, name="mean_loss")
    return metrics


def build_for(estimator, mode: str, input_fn: Callable) -> ModelGraph:
    """Builds an Estimator's model for `mode` over its `input_fn` (both get the params of that mode)."""
    params = estimator._params_for(mode)  # pylint: disable=protected-access
    return build(model_fn=model_fn_of(estimator), params=params, config=estimator.config, mode=mode,
                 input_fn=input_fn)


def model_fn_of(estimator) -> Callable:
    """What the engine calls to build `estimator`'s model: its model_fn, or, where a subclass overrides
    `_call_model_fn` (or a program patched it, as DLRover's trainer does), a model_fn that goes through it, as
    tf.estimator 2.15 called `self._call_model_fn(features, labels, mode, config)` for every graph."""
    is_default = getattr(estimator, "_is_default_call_model_fn", None)
    if is_default is None or is_default():
        return estimator.model_fn

    def through_call_model_fn(features, labels, mode, config):
        return estimator._call_model_fn(features, labels, mode, config)  # pylint: disable=protected-access

    through_call_model_fn.__qualname__ = f"{type(estimator).__qualname__}._call_model_fn"
    return through_call_model_fn


def build(
    *,
    model_fn: Callable,
    params: dict | None,
    config: RunConfig,
    mode: str,
    input_fn: Callable | None = None,
    features: Any = None,
    labels: Any = None,
    place_on_cluster: bool = True,
) -> ModelGraph:
    """Builds the model into the default graph.

    Either `input_fn` is called (training, evaluation, prediction) or the
    given `features`/`labels` are used (export, where a serving receiver made
    them). `place_on_cluster=False` ignores the cluster's device placement
    (export runs in a local session).
    """
    long_lived.freeze_once()  # what exists before the first graph stays out of the collector's full passes
    with seeded(config.tf_random_seed):
        return _build(model_fn, params, config, mode, input_fn, features, labels, place_on_cluster)


def _build(model_fn, params, config, mode, input_fn, features, labels, place_on_cluster) -> ModelGraph:
    graph = tf.compat.v1.get_default_graph()
    device_fn = config.effective_device_fn() if place_on_cluster else None
    on_devices = lambda: tf.compat.v1.device(device_fn) if device_fn else contextlib.nullcontext()  # noqa: E731
    with on_devices():
        global_step = tf.compat.v1.train.get_or_create_global_step()
    input_hooks: tuple = ()
    step_outputs: dict = {}
    input_start = state_updates.last_op_id(graph)
    if input_fn is not None:
        result = calls.call_input_fn(input_fn, mode, params or {}, config)
        features, labels, input_hooks, step_outputs = result.features, result.labels, result.hooks, result.step_outputs
    model_start = state_updates.last_op_id(graph)
    num_ps = config.num_ps_replicas if device_fn is not None and config.cluster.is_distributed else 0
    with on_devices(), fused_updates.fused_sparse_adam(config.fuse_sparse_updates), \
            embedding_engine.model_fn_scope(training=mode == ModeKeys.TRAIN, num_ps=num_ps):
        spec = calls.call_model_fn(model_fn, features, labels, mode, params, config)
    if mode == ModeKeys.TRAIN:
        input_ops = {op for op in graph.get_operations() if input_start < tf_internals.op_id(op) <= model_start}
        if not input_ops:  # features built by a receiver: everything before model_fn is input
            input_ops = {op for op in graph.get_operations() if tf_internals.op_id(op) <= model_start}
        spec = keras_traps.attach_dangling_updates(spec, graph, model_start, input_ops)
        keras_traps.check_regularization(spec, graph)
        tf.compat.v1.summary.scalar("loss", spec.loss)
    return ModelGraph(spec=spec, global_step=global_step, features=features, labels=labels, input_hooks=input_hooks,
                      step_outputs=step_outputs)
