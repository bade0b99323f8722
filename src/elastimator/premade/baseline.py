"""BaselineClassifier / BaselineRegressor: ignore the features, learn the label distribution.

A baseline answers "what does a model that knows nothing about the inputs score?": the
classifier learns the class priors, the regressor the label mean.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from elastimator.errors import InputFnError
from elastimator.premade.canned import CannedEstimator, Part, classification_head, regression_head

BASELINE_SCOPE = "baseline"
DEFAULT_LEARNING_RATE = 0.3


def _batch_size(features) -> tf.Tensor:
    tensors = list(features.values()) if isinstance(features, Mapping) else [features]
    for tensor in tensors:
        if isinstance(tensor, tf.SparseTensor):
            return tensor.dense_shape[0]
        if isinstance(tensor, tf.Tensor) and tensor.shape.rank:
            return tf.shape(tensor, out_type=tf.int64)[0]
    raise InputFnError("Baseline estimators read the batch size from the features; input_fn returned no "
                       "batched feature tensor.")


class _Baseline(CannedEstimator):
    def __init__(self, head, *, optimizer, model_dir, config, warm_start_from):
        super().__init__(head, [Part(BASELINE_SCOPE, optimizer, DEFAULT_LEARNING_RATE)], model_dir=model_dir,
                         config=config, warm_start_from=warm_start_from)

    def _feature_columns(self):
        return ()

    def _logits(self, features, training):
        with tf.compat.v1.variable_scope(BASELINE_SCOPE):
            bias = tf.compat.v1.get_variable("bias", [self.head.logits_dimension],
                                             initializer=tf.compat.v1.zeros_initializer())
        rows = tf.cast(_batch_size(features), tf.int32)
        return tf.tile(tf.expand_dims(bias, 0), tf.stack([rows, 1]))


class BaselineClassifier(_Baseline):
    """Predicts the training labels' class distribution for every example.

    Args:
        model_dir, config, warm_start_from: As for `Estimator`.
        n_classes, weight_column, label_vocabulary, loss_reduction: As for `DNNClassifier`.
        optimizer: 'Ftrl' (default, learning rate 0.3), another name, or an optimizer.
    """

    def __init__(self, model_dir=None, n_classes: int = 2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, loss_reduction="sum_over_batch_size", *, warm_start_from=None):
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, optimizer=optimizer, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class BaselineRegressor(_Baseline):
    """Predicts the training labels' mean for every example; arguments as `BaselineClassifier`,
    with `label_dimension` for the class arguments."""

    def __init__(self, model_dir=None, label_dimension: int = 1, weight_column=None, optimizer="Ftrl",
                 config=None, loss_reduction="sum_over_batch_size", *, warm_start_from=None):
        head = regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, optimizer=optimizer, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class BaselineEstimator(_Baseline):
    """The features-blind baseline for any head; other arguments as `BaselineClassifier`."""

    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None, *, warm_start_from=None):
        super().__init__(head, optimizer=optimizer, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)
