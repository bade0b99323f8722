"""`model_to_estimator`: a compiled Keras model (Keras 3, or tf-keras as `tf.keras` was) as an Estimator.

Every graph the engine builds gets its own copy of the model, rebuilt from the
model's config (`from_config`), so the Keras model the user holds is never touched.
The copy is trained with the compiled loss (plus the model's regularization losses)
by a graph-mode optimizer — a Keras 3 optimizer's `tf.compat.v1.train` twin, a
tf-keras optimizer's legacy twin, as tf.estimator 2.15 used — evaluated with the
compiled metrics, and starts from the Keras model's current weights when model_dir
has no checkpoint yet.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from elastimator._keras_routing import tf_keras
from elastimator.errors import ConfigError, InputFnError
from elastimator.estimator import Estimator, EstimatorSpec, ModeKeys, tf_variable
from elastimator.export.outputs import PredictOutput
from elastimator import optimizers


@dataclasses.dataclass(frozen=True)
class _Blueprint:
    """What each graph needs to rebuild and train the model; captured once, eagerly."""

    keras: Any
    """The Keras the model is written against: the `keras` (3) or `tf_keras` module."""
    cls: type
    config: dict
    custom_objects: Mapping[str, Any]
    weights: tuple[np.ndarray, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    losses: tuple[Callable, ...]
    loss_weights: tuple[float, ...]
    metrics: tuple[Any, ...]
    optimizer: Any
    """What `optimizers.get_optimizer_instance` turns into each graph's optimizer."""
    metric_names_map: Mapping[str, str]


def model_to_estimator(keras_model=None, keras_model_path: str | None = None, custom_objects=None,
                       model_dir: str | None = None, config=None, metric_names_map=None, optimizer=None,
                       warm_start_from=None) -> Estimator:
    """An Estimator that trains, evaluates, predicts with and exports `keras_model`.

    Args:
        keras_model: A compiled Keras model — Keras 3, or tf-keras (what `tf.keras` is once elastimator
            is imported) — functional, Sequential, or subclassed with a `get_config` that records its
            constructor arguments.
        keras_model_path: Instead of `keras_model`, a saved model to load: a `.keras` file with Keras 3,
            anything else (`.h5`, a SavedModel directory) with tf-keras.
        custom_objects: Custom layers, losses and metrics needed to rebuild the model from its config.
        model_dir, config, warm_start_from: As for `Estimator`.
        metric_names_map: Renames compiled metrics in evaluation results (`{"accuracy": "acc"}`).
        optimizer: An optimizer (or name; see `elastimator.optimizers`) to use instead of the
            compiled one.

    Returns:
        An `Estimator`. Features are the model's inputs: a dict keyed by input name (a bare tensor
        for a single-input model); labels likewise by output name. Predictions are keyed by output name.

    Raises:
        ConfigError: The model is not compiled, cannot be rebuilt from its config, or uses an optimizer
            or loss with no graph-mode equivalent.
    """
    if (keras_model is None) == (keras_model_path is None):
        raise ConfigError("model_to_estimator: pass exactly one of keras_model or keras_model_path.")
    if keras_model_path is not None:
        loader = _keras() if str(keras_model_path).endswith(".keras") else tf_keras()
        keras_model = loader.models.load_model(keras_model_path, custom_objects=custom_objects)
    blueprint = _blueprint(keras_model, dict(custom_objects or {}), dict(metric_names_map or {}), optimizer)
    return Estimator(model_fn=_model_fn_for(blueprint), model_dir=model_dir, config=config,
                     warm_start_from=warm_start_from)


# Keras is imported where it is used, not with elastimator: a process that never builds a Keras model (an
# `elastimator run` of a model_fn, a compat program without tf.keras) does not pay for loading it.
def _keras():
    import keras  # pylint: disable=import-outside-toplevel

    return keras


def _is_keras3(model) -> bool:
    """Whether `model` is a Keras 3 model (Keras is loaded if there is one)."""
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(model, keras.Model)


def _keras_of(model):
    """The Keras module `model` belongs to, or None."""
    if _is_keras3(model):
        return _keras()
    if type(model).__module__.startswith("tf_keras.") and isinstance(model, tf_keras().Model):
        return tf_keras()
    return None


def _blueprint(model, custom_objects, metric_names_map, optimizer) -> _Blueprint:
    kmodule = _keras_of(model)
    if kmodule is None:
        raise ConfigError(f"model_to_estimator: expected a Keras model (keras.Model or tf.keras.Model); got "
                          f"{type(model).__module__}.{type(model).__name__}.")
    keras3 = kmodule.__name__ == "keras"
    compiled_flag = getattr(model, "compiled", None) if keras3 else getattr(model, "_is_compiled", None)
    if not compiled_flag or getattr(model, "optimizer", None) is None:
        raise ConfigError(f"model_to_estimator: model {model.name!r} is not compiled. Call "
                          "model.compile(optimizer=..., loss=...) first; the estimator trains with what compile set.")
    outputs = tuple(getattr(model, "output_names", None) or ("output",))
    compiled = model._compile_config.config if getattr(model, "_compile_config", None) else {}  # pylint: disable=protected-access
    losses, weights = _losses(kmodule, model.loss, compiled.get("loss_weights"), outputs)
    if optimizer is not None:
        factory = optimizers.prepare(optimizer)
    elif keras3:
        factory = optimizers.optimizer_factory(model.optimizer)
    else:
        factory = optimizers.prepare(model.optimizer)  # tf-keras: its legacy twin, as tf.estimator 2.15 used
    return _Blueprint(
        keras=kmodule, cls=type(model), config=model.get_config(), custom_objects=custom_objects,
        weights=tuple(model.get_weights()) if model.built else (),
        input_names=tuple(t.name for t in getattr(model, "inputs", None) or ()),
        output_names=outputs, losses=losses, loss_weights=weights,
        metrics=tuple(compiled.get("metrics") or ()), optimizer=factory, metric_names_map=metric_names_map)


def _losses(kmodule, loss, raw_weights, outputs: tuple[str, ...]) -> tuple[tuple[Callable, ...], tuple[float, ...]]:
    """The compiled loss per output, and its weight (from compile's loss_weights)."""
    if isinstance(loss, Mapping):
        missing = [o for o in outputs if o not in loss]
        if missing:
            raise ConfigError(f"model_to_estimator: compiled loss dict lacks output(s) {missing}; "
                              f"it has {sorted(loss)}.")
        loss = [loss[o] for o in outputs]
    elif not isinstance(loss, (list, tuple)):
        loss = [loss] * len(outputs)
    if len(loss) != len(outputs):
        raise ConfigError(f"model_to_estimator: {len(loss)} compiled losses for {len(outputs)} outputs "
                          f"{list(outputs)}.")
    functions = tuple(kmodule.losses.get(item) for item in loss)
    if isinstance(raw_weights, Mapping):
        weights = tuple(float(raw_weights.get(o, 1.0)) for o in outputs)
    elif raw_weights:
        weights = tuple(float(w) for w in raw_weights)
    else:
        weights = (1.0,) * len(outputs)
    return functions, weights


def _model_fn_for(blueprint: _Blueprint) -> Callable:
    def model_fn(features, labels, mode):
        model = _rebuild(blueprint)
        built_updates = set(_layer_updates(model))  # made on the Input placeholders when the model was rebuilt
        outputs = model(_model_inputs(features, blueprint), training=mode == ModeKeys.TRAIN)
        call_updates = [u for u in _layer_updates(model) if u not in built_updates]
        outputs = _as_list(outputs)
        predictions = dict(zip(blueprint.output_names, outputs)) if len(outputs) == len(blueprint.output_names) \
            else {f"output_{i}": o for i, o in enumerate(outputs)}
        scaffold = _initial_weights_scaffold(model, blueprint)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, scaffold=scaffold,
                                 export_outputs={"serving_default": PredictOutput(predictions)})
        targets = _targets(labels, blueprint)
        # A loss function (not a Loss object) returns per-example values: mean them, as Keras' compile does.
        loss = tf.add_n([w * tf.reduce_mean(tf.cast(fn(y, out), tf.float32))
                         for fn, w, y, out in zip(blueprint.losses, blueprint.loss_weights, targets, outputs)])
        if model.losses:  # kernel / activity regularizers
            loss = loss + tf.add_n([tf.cast(x, tf.float32) for x in model.losses])
        if mode == ModeKeys.EVAL:
            metrics = _metric_ops(blueprint, targets, outputs)
            return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=metrics, scaffold=scaffold)
        variables = [tf_variable(v) for v in model.trainable_weights]
        optimizer = optimizers.get_optimizer_instance(blueprint.optimizer, 0.001)
        with tf.control_dependencies(call_updates):
            train_op = optimizers.minimize(optimizer, loss, variables, tf.compat.v1.train.get_global_step())
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op, scaffold=scaffold)

    return model_fn


def _layer_updates(model) -> list:
    """A tf-keras model's pending state updates in this graph (batch-norm statistics); Keras 3 has none here."""
    if _is_keras3(model):
        return []
    return [u for u in getattr(model, "updates", None) or () if isinstance(u, (tf.Tensor, tf.Operation))]


def _rebuild(blueprint: _Blueprint):
    with blueprint.keras.utils.custom_object_scope(dict(blueprint.custom_objects)):
        try:
            return blueprint.cls.from_config(dict(blueprint.config))
        except Exception as e:  # noqa: BLE001  # Any failure here means the config cannot rebuild the model.
            raise ConfigError(
                f"model_to_estimator: {blueprint.cls.__name__}.from_config(model.get_config()) failed: {e}. "
                "A subclassed model needs get_config() returning its constructor arguments; custom layers need "
                "custom_objects."
            ) from e


def _model_inputs(features, blueprint: _Blueprint):
    names = blueprint.input_names
    if not isinstance(features, Mapping) or not names:
        return features
    missing = [n for n in names if n not in features]
    if len(names) == 1 and missing and len(features) == 1:
        return next(iter(features.values()))  # One input, one feature: names need not match.
    if missing:
        raise InputFnError(f"model_to_estimator: the model's input(s) {missing} are not among the features "
                           f"{sorted(features)}. Key the features dict by the model's input names {list(names)}.")
    return features[names[0]] if len(names) == 1 else [features[n] for n in names]


def _targets(labels, blueprint: _Blueprint) -> list:
    names = blueprint.output_names
    if labels is None:
        raise InputFnError("model_to_estimator: train and evaluate need labels; input_fn returned none.")
    if isinstance(labels, Mapping):
        missing = [n for n in names if n not in labels]
        if missing and not (len(names) == 1 and len(labels) == 1):
            raise InputFnError(f"model_to_estimator: labels lack output(s) {missing}; got {sorted(labels)}. Key the "
                               f"labels dict by the model's output names {list(names)}.")
        return [next(iter(labels.values()))] if missing else [labels[n] for n in names]
    if len(names) != 1:
        raise InputFnError(f"model_to_estimator: the model has outputs {list(names)}; return labels as a dict keyed "
                           "by those names.")
    return [labels]


def _metric_ops(blueprint: _Blueprint, targets, outputs) -> dict:
    metrics = {}
    for spec in blueprint.metrics:
        for index, (y, out) in enumerate(zip(targets, outputs)):
            metric = _metric(blueprint.keras, spec, blueprint.losses[index])
            metric.update_state(y, out)
            name = metric.name if len(outputs) == 1 else f"{blueprint.output_names[index]}_{metric.name}"
            metrics[blueprint.metric_names_map.get(name, name)] = metric
    return metrics


_ACCURACY_FOR_LOSS = {
    "binary_crossentropy": "BinaryAccuracy",
    "sparse_categorical_crossentropy": "SparseCategoricalAccuracy",
    "categorical_crossentropy": "CategoricalAccuracy",
}


def _metric(kmodule, spec, loss):
    """A fresh Keras metric for a compiled metric spec ('accuracy' follows the loss, as in Keras)."""
    metrics = kmodule.metrics
    if isinstance(spec, str) and spec in ("accuracy", "acc"):
        loss_name = getattr(getattr(loss, "fn", loss), "__name__", "")
        return getattr(metrics, _ACCURACY_FOR_LOSS.get(loss_name, "Accuracy"))(name=spec)
    if isinstance(spec, metrics.Metric):
        return type(spec).from_config(spec.get_config())
    found = metrics.get(spec)
    if isinstance(found, metrics.Metric):
        return type(found).from_config(found.get_config())
    if callable(found):
        return metrics.MeanMetricWrapper(found, name=spec if isinstance(spec, str) else found.__name__)
    raise ConfigError(f"model_to_estimator: cannot evaluate compiled metric {spec!r}.")


def _initial_weights_scaffold(model, blueprint: _Blueprint) -> tf.compat.v1.train.Scaffold | None:
    """A scaffold whose init_fn loads the Keras model's weights when there is no checkpoint to restore."""
    if not blueprint.weights:
        return None
    variables = [tf_variable(v) for v in model.weights]
    shapes = [tuple(v.shape) for v in variables]
    expected = [w.shape for w in blueprint.weights]
    if shapes != expected:
        raise ConfigError(
            f"model_to_estimator: {blueprint.cls.__name__} rebuilt from its config has weight shapes {shapes}, but the "
            f"model passed in has {expected}. Its get_config() must return the constructor arguments that built it."
        )
    feeds = [tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
    assign = tf.group(*[tf.compat.v1.assign(v, p) for v, p in zip(variables, feeds)], name="keras_initial_weights")

    def init_fn(scaffold, session):
        del scaffold
        session.run(assign, feed_dict=dict(zip(feeds, blueprint.weights)))

    return tf.compat.v1.train.Scaffold(init_fn=init_fn)


def _as_list(outputs) -> list:
    if isinstance(outputs, Mapping):
        return list(outputs.values())
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
