"""`elastimator.optimizers`: the `optimizer=` arguments estimators take (names, v1 optimizers, Keras optimizers,
factories), as tf.estimator 2.15 took them, made into what trains a v1 graph. The canned estimators, heads and
`model_to_estimator` all take them from here."""

from elastimator.optimizers.arguments import (KERAS_OPTIMIZERS, OPTIMIZERS, get_optimizer_instance,
                                              get_optimizer_instance_v2, is_graph_optimizer, minimize, prepare)
from elastimator.optimizers.keras3 import optimizer_factory

__all__ = ["KERAS_OPTIMIZERS", "OPTIMIZERS", "get_optimizer_instance", "get_optimizer_instance_v2", "is_graph_optimizer",
           "minimize", "optimizer_factory", "prepare"]
