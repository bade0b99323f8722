"""Optimizers by name or object, as tf.estimator 2.15's canned estimators took them, applied inside the graph.

Four forms are accepted (`optimizer=` of the canned estimators and of
`Head.create_estimator_spec`):

* a name ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'), built with the estimator's
  default learning rate as a `tf.compat.v1.train` optimizer;
* a `tf.compat.v1.train.Optimizer`;
* a tf-keras legacy optimizer (`tf.keras.optimizers.legacy.Ftrl(...)`, learning-rate
  schedules included), applied with its graph-mode `get_updates`, its `iterations`
  being the global step as in tf.estimator 2.15. A newer tf-keras optimizer
  (`tf.keras.optimizers.Adam`) is converted to its legacy twin where it is handed
  over, as 2.15 did; a Keras 3 optimizer becomes its `tf.compat.v1.train` twin;
* a no-argument callable returning any of those, called inside each graph.

Keras optimizer objects hold variables of the graph they first ran in, and each
estimator call builds a new graph: `prepare` therefore turns an object handed
over eagerly into a factory of a fresh copy (from its config) per graph.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from elastimator._keras_routing import tf_keras
from elastimator.errors import ConfigError
from elastimator.optimizers.keras3 import optimizer_factory

_v1 = tf.compat.v1.train

OPTIMIZERS: dict[str, Callable[[float], tf.compat.v1.train.Optimizer]] = {
    "Adagrad": _v1.AdagradOptimizer,
    "Adam": _v1.AdamOptimizer,
    "Ftrl": _v1.FtrlOptimizer,
    "RMSProp": _v1.RMSPropOptimizer,
    "SGD": _v1.GradientDescentOptimizer,
}
"""Names accepted for `optimizer=`, each built with the estimator's default learning rate."""


def _keras_kind(optimizer) -> str | None:
    """'legacy' (tf-keras OptimizerV2), 'tf_keras' (a newer tf-keras optimizer), 'keras' (Keras 3) or None."""
    modules = [klass.__module__ for klass in type(optimizer).__mro__]
    if any(m.startswith("tf_keras.src.optimizers.legacy") for m in modules):
        return "legacy"
    if any(m.startswith("tf_keras.") for m in modules):
        return "tf_keras"
    if any(m.startswith("keras.") for m in modules):
        return "keras"
    return None


def is_graph_optimizer(optimizer) -> bool:
    """True for what `minimize` applies: a v1 optimizer or a tf-keras legacy optimizer."""
    return isinstance(optimizer, _v1.Optimizer) or _keras_kind(optimizer) == "legacy"


def prepare(optimizer: Any) -> Any:
    """What an estimator keeps of the optimizer it is given (eagerly): names, v1 optimizers and
    callables as they are, Keras objects as a factory of a fresh graph-mode copy.

    Raises:
        ConfigError: A Keras optimizer setting without a graph-mode equivalent.
    """
    kind = None if isinstance(optimizer, (str, _v1.Optimizer)) else _keras_kind(optimizer)
    if kind is None:
        return optimizer
    if kind == "keras":
        return optimizer_factory(optimizer, where="optimizer")
    if kind == "tf_keras":
        optimizer = tf_keras().__internal__.optimizers.convert_to_legacy_optimizer(optimizer)
    config, cls = optimizer.get_config(), type(optimizer)
    return lambda: cls.from_config(config)


def get_optimizer_instance(optimizer, learning_rate: float | None = None):
    """The graph-mode optimizer `optimizer` names, is, or returns (see the module docstring).

    Args:
        optimizer: A name from `OPTIMIZERS` (case-insensitive), a `tf.compat.v1.train.Optimizer`,
            a tf-keras legacy optimizer, or a no-argument callable returning one (called inside
            the graph being built, as optimizers must be).
        learning_rate: Used when `optimizer` is a name.

    Raises:
        ConfigError: The name is unknown, a name came without a learning rate, or the object is
            not an optimizer that can run in a graph.
    """
    if isinstance(optimizer, str):
        by_lower = {name.lower(): factory for name, factory in OPTIMIZERS.items()}
        factory = by_lower.get(optimizer.lower())
        if factory is None:
            raise ConfigError(f"optimizer: unknown name {optimizer!r}; expected one of {sorted(OPTIMIZERS)}, "
                              "a tf.compat.v1.train.Optimizer, a tf.keras.optimizers.legacy optimizer, or a "
                              "callable returning one.")
        if learning_rate is None:
            raise ConfigError(f"optimizer {optimizer!r} is a name, so it needs a learning_rate.")
        return factory(learning_rate)
    if callable(optimizer) and _keras_kind(optimizer) is None and not isinstance(optimizer, _v1.Optimizer):
        optimizer = optimizer()
    if is_graph_optimizer(optimizer):
        return optimizer
    kind = _keras_kind(optimizer)
    if kind is not None:
        raise ConfigError(
            f"optimizer: {type(optimizer).__module__}.{type(optimizer).__name__} was created inside the graph, where "
            f"its settings cannot be read; use tf.keras.optimizers.legacy.{type(optimizer).__name__}(...) there, "
            "or hand the optimizer to the estimator's constructor (it is converted there, as tf.estimator 2.15 did)."
        )
    raise ConfigError(
        f"optimizer: expected a name from {sorted(OPTIMIZERS)}, a tf.compat.v1.train.Optimizer, a "
        f"tf.keras.optimizers.legacy optimizer, or a callable returning one; got "
        f"{type(optimizer).__module__}.{type(optimizer).__name__}."
    )


KERAS_OPTIMIZERS: dict[str, str] = {"Adagrad": "Adagrad", "Adam": "Adam", "Ftrl": "Ftrl", "RMSProp": "RMSprop",
                                    "SGD": "SGD"}
"""Names `get_optimizer_instance_v2` takes -> the tf-keras legacy optimizer class each makes."""


def get_optimizer_instance_v2(optimizer, learning_rate: float | None = None):
    """A tf-keras legacy optimizer (`OptimizerV2`), as tf.estimator 2.15's TF2 canned estimators took one.

    Args:
        optimizer: A name from `KERAS_OPTIMIZERS` (made with `learning_rate`, or the class's own default), a
            tf-keras legacy optimizer, a newer tf-keras optimizer handed over eagerly (converted to its legacy
            twin, as 2.15 did), or a no-argument callable returning one of those.
        learning_rate: Used when `optimizer` is a name.

    Raises:
        ConfigError: (a ValueError, as 2.15 raised) the name is unknown, a newer tf-keras optimizer came inside
            a graph, or the object is not a tf-keras optimizer.
    """
    keras = tf_keras()
    if isinstance(optimizer, str):
        if optimizer not in KERAS_OPTIMIZERS:
            raise ConfigError(f"optimizer: unknown name {optimizer!r}; expected one of {sorted(KERAS_OPTIMIZERS)}, "
                              "a tf.keras.optimizers.legacy optimizer, or a callable returning one.")
        cls = getattr(keras.optimizers.legacy, KERAS_OPTIMIZERS[optimizer])
        return cls(learning_rate=learning_rate) if learning_rate else cls()
    if callable(optimizer) and _keras_kind(optimizer) is None:
        optimizer = optimizer()
    kind = _keras_kind(optimizer)
    if kind == "tf_keras":
        if not tf.executing_eagerly():
            raise ConfigError(f"optimizer: tf.keras.optimizers.{type(optimizer).__name__} was handed over inside a "
                              f"graph, where it cannot be converted; use tf.keras.optimizers.legacy."
                              f"{type(optimizer).__name__}(...) (tf.estimator 2.15 refused it there too).")
        return keras.__internal__.optimizers.convert_to_legacy_optimizer(optimizer)
    if kind == "legacy":
        return optimizer
    raise ConfigError(f"optimizer: expected a tf.keras.optimizers.legacy optimizer, a name from "
                      f"{sorted(KERAS_OPTIMIZERS)}, or a callable returning one; got "
                      f"{type(optimizer).__module__}.{type(optimizer).__name__}.")


def minimize(optimizer, loss: tf.Tensor, var_list=None, global_step=None) -> tf.Operation:
    """One update of `var_list` (default: the trainable variables) that also increments `global_step`, if given.

    A tf-keras optimizer counts its steps in `iterations`; given the global step, that is the
    global step, so learning-rate schedules follow it (as in tf.estimator 2.15).
    """
    if isinstance(optimizer, _v1.Optimizer):
        return optimizer.minimize(loss, global_step=global_step, var_list=var_list)
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas > 1 and tf.compat.v1.distribute.get_loss_reduction() == tf.distribute.ReduceOp.MEAN:
        # Under train_distribute a v1 optimizer divides a mean loss by the replicas itself (their gradients are
        # summed); a tf-keras one does not, so the mean is divided here, as 2.15's heads did.
        loss = loss / replicas
    if global_step is not None and not any(weight is global_step for weight in optimizer.weights):
        # A caller may have made the global step its `iterations` already (TF Lattice's canned estimators do,
        # as 2.15's own did, before handing the optimizer to a head); tf-keras refuses a second assignment.
        optimizer.iterations = global_step
    if var_list is None:
        var_list = tf.compat.v1.trainable_variables()
    return optimizer.get_updates(loss, list(var_list))[0]
