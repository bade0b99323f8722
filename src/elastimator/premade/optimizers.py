"""Optimizers by name or object, as the canned estimators take them."""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from elastimator.errors import ConfigError

_v1 = tf.compat.v1.train

OPTIMIZERS: dict[str, Callable[[float], tf.compat.v1.train.Optimizer]] = {
    "Adagrad": _v1.AdagradOptimizer,
    "Adam": _v1.AdamOptimizer,
    "Ftrl": _v1.FtrlOptimizer,
    "RMSProp": _v1.RMSPropOptimizer,
    "SGD": _v1.GradientDescentOptimizer,
}
"""Names accepted for `optimizer=`, each built with the estimator's default learning rate."""


def get_optimizer_instance(optimizer, learning_rate: float | None = None) -> tf.compat.v1.train.Optimizer:
    """The optimizer `optimizer` names or is.

    Args:
        optimizer: A name from `OPTIMIZERS` (case-insensitive), a
            `tf.compat.v1.train.Optimizer`, or a no-argument callable returning one
            (called inside the graph being built, as optimizers must be).
        learning_rate: Used when `optimizer` is a name.

    Raises:
        ConfigError: The name is unknown, a name came without a learning rate, or the object is
            not a graph-mode optimizer.
    """
    if isinstance(optimizer, str):
        by_lower = {name.lower(): factory for name, factory in OPTIMIZERS.items()}
        factory = by_lower.get(optimizer.lower())
        if factory is None:
            raise ConfigError(f"optimizer: unknown name {optimizer!r}; expected one of {sorted(OPTIMIZERS)}, "
                              "a tf.compat.v1.train.Optimizer, or a callable returning one.")
        if learning_rate is None:
            raise ConfigError(f"optimizer {optimizer!r} is a name, so it needs a learning_rate.")
        return factory(learning_rate)
    if callable(optimizer) and not isinstance(optimizer, tf.compat.v1.train.Optimizer):
        optimizer = optimizer()
    if not isinstance(optimizer, tf.compat.v1.train.Optimizer):
        raise ConfigError(
            f"optimizer: expected a name from {sorted(OPTIMIZERS)}, a tf.compat.v1.train.Optimizer or a callable "
            f"returning one; got {type(optimizer).__module__}.{type(optimizer).__name__}. Keras optimizers run "
            "eagerly; in an estimator use e.g. tf.compat.v1.train.AdamOptimizer(learning_rate)."
        )
    return optimizer
