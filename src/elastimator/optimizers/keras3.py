"""A compiled Keras optimizer's settings, rebuilt as the graph-mode optimizer that trains the estimator.

Keras 3 optimizers update variables eagerly; an estimator's train op runs in a v1 graph.
The compiled optimizer's config (learning rate, betas, momentum, ...) therefore becomes
the equivalent `tf.compat.v1.train` optimizer. Settings that have no graph-mode
equivalent are refused by name rather than silently dropped.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from elastimator.errors import ConfigError

_v1 = tf.compat.v1.train


def _sgd(c):
    if c.get("momentum"):
        return _v1.MomentumOptimizer(c["learning_rate"], c["momentum"], use_nesterov=bool(c.get("nesterov")))
    return _v1.GradientDescentOptimizer(c["learning_rate"])


_BUILDERS: dict[str, Callable[[dict], tf.compat.v1.train.Optimizer]] = {
    "Adam": lambda c: _v1.AdamOptimizer(c["learning_rate"], c["beta_1"], c["beta_2"], c["epsilon"]),
    "SGD": _sgd,
    "Adagrad": lambda c: _v1.AdagradOptimizer(c["learning_rate"], c["initial_accumulator_value"]),
    "RMSprop": lambda c: _v1.RMSPropOptimizer(c["learning_rate"], decay=c["rho"], momentum=c["momentum"],
                                              epsilon=c["epsilon"], centered=c["centered"]),
    "Adadelta": lambda c: _v1.AdadeltaOptimizer(c["learning_rate"], c["rho"], c["epsilon"]),
    "Ftrl": lambda c: _v1.FtrlOptimizer(c["learning_rate"], c["learning_rate_power"], c["initial_accumulator_value"],
                                        c["l1_regularization_strength"], c["l2_regularization_strength"],
                                        l2_shrinkage_regularization_strength=c["l2_shrinkage_regularization_strength"]),
}
_UNSUPPORTED_IF_SET = ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "amsgrad", "use_ema",
                       "gradient_accumulation_steps", "loss_scale_factor")


def optimizer_factory(keras_optimizer, where: str = "model_to_estimator") -> Callable[[], tf.compat.v1.train.Optimizer]:
    """A factory of the graph-mode twin of `keras_optimizer`, checked now (eagerly), built per graph.

    `where` starts the error messages (who was given the optimizer).
    """
    name = type(keras_optimizer).__name__
    if name not in _BUILDERS:
        raise ConfigError(
            f"{where}: the optimizer is {name}, which has no graph-mode equivalent; "
            f"expected one of {sorted(_BUILDERS)}. Compile with one of those, or pass optimizer= a "
            "tf.compat.v1.train.Optimizer."
        )
    config: dict[str, Any] = keras_optimizer.get_config()
    if isinstance(config.get("learning_rate"), dict):
        raise ConfigError(f"{where}: {name} uses a learning-rate schedule, which does not carry over to "
                          "graph mode; compile with a float learning rate, or pass optimizer= a "
                          "tf.compat.v1.train.Optimizer with tf.compat.v1.train.*_decay.")
    set_ = [key for key in _UNSUPPORTED_IF_SET if config.get(key)]
    if set_:
        raise ConfigError(f"{where}: {name} sets {set_}, which the graph-mode {name} does not support; "
                          "compile without them, or pass optimizer= a tf.compat.v1.train.Optimizer.")
    return lambda: _BUILDERS[name](config)
