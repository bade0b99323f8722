"""Regression head: squared error over `label_dimension` real-valued outputs."""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from elastimator.errors import ConfigError, HeadError
from elastimator.export.outputs import PredictOutput, RegressionOutput
from elastimator.premade import head_metrics
from elastimator.premade.head import ConcreteHead
from elastimator.premade.keys import MetricKeys, PredictionKeys, SignatureKeys

P = PredictionKeys


class RegressionHead(ConcreteHead):
    """Mean squared error regression.

    Args:
        label_dimension: Number of regression targets per example.
        weight_column, loss_reduction, loss_fn, name: See `Head` (`loss_fn` gets float labels).
        inverse_link_fn: Maps logits to predictions (e.g. `tf.exp` for a log-link); the loss
            compares labels with the predictions. Identity by default.

    Predictions: `predictions` (and `logits` when an inverse link is set). Metrics:
    `average_loss`, `label/mean`, `prediction/mean`, `loss`. Signatures: `serving_default`
    and `regression` (for label_dimension 1), `predict`.
    """

    def __init__(self, label_dimension: int = 1, weight_column=None, loss_reduction: str = "sum_over_batch_size",
                 loss_fn=None, inverse_link_fn: Callable[[tf.Tensor], tf.Tensor] | None = None,
                 name: str | None = None):
        if not isinstance(label_dimension, int) or label_dimension < 1:
            raise ConfigError(f"RegressionHead: label_dimension must be an int >= 1; got {label_dimension!r}.")
        super().__init__(weight_column=weight_column, loss_reduction=loss_reduction, loss_fn=loss_fn, name=name)
        self._label_dimension = label_dimension
        self._inverse_link_fn = inverse_link_fn

    @property
    def logits_dimension(self) -> int:
        return self._label_dimension

    def predictions(self, logits):
        """The predictions for `logits` [batch, label_dimension] (2.15's RegressionHead took no `keys`)."""
        return super().predictions(logits)

    def _predictions(self, logits):
        if self._inverse_link_fn is None:
            return {P.PREDICTIONS: logits}
        return {P.PREDICTIONS: self._inverse_link_fn(logits), P.LOGITS: logits}

    def _labels(self, labels, logits):
        if isinstance(labels, dict) or isinstance(labels, tf.SparseTensor):
            raise HeadError("RegressionHead: labels must be one dense tensor; got "
                            f"{'a dict' if isinstance(labels, dict) else 'a SparseTensor'}.")
        labels = tf.convert_to_tensor(labels)
        if not (labels.dtype.is_floating or labels.dtype.is_integer):
            raise HeadError(f"RegressionHead: labels must be numeric; got dtype {labels.dtype.name}.")
        if labels.shape.rank == 1 and self._label_dimension == 1:
            labels = tf.expand_dims(labels, -1)
        if labels.shape.rank != 2 or (labels.shape[-1] is not None and labels.shape[-1] != self._label_dimension):
            raise HeadError(f"RegressionHead: expected labels of shape [batch, {self._label_dimension}] "
                            f"(label_dimension={self._label_dimension}); got {labels.shape}.")
        return tf.cast(labels, tf.float32)

    def _unweighted_loss(self, labels, logits):
        predictions = logits if self._inverse_link_fn is None else self._inverse_link_fn(logits)
        return tf.math.squared_difference(predictions, labels)

    def _metric_ops(self, labels, predictions, unweighted_loss, weights):
        weights = None if weights is None else weights * tf.ones_like(labels)
        return {
            MetricKeys.LABEL_MEAN: tf.compat.v1.metrics.mean(labels, weights=weights, name="label_mean"),
            MetricKeys.PREDICTION_MEAN: tf.compat.v1.metrics.mean(
                predictions[P.PREDICTIONS], weights=weights, name="prediction_mean"),
        }

    def _keras_metrics(self):
        return {key: head_metrics.mean(key) for key in (MetricKeys.LABEL_MEAN, MetricKeys.PREDICTION_MEAN)}

    def _update_keras_metrics(self, metrics, labels, predictions, weights):
        weights = None if weights is None else weights * tf.ones_like(labels)
        metrics[MetricKeys.LABEL_MEAN].update_state(labels, sample_weight=weights)
        metrics[MetricKeys.PREDICTION_MEAN].update_state(predictions[P.PREDICTIONS], sample_weight=weights)

    def export_outputs(self, predictions):
        predict = PredictOutput(predictions)
        if self._label_dimension != 1:
            return {SignatureKeys.SERVING_DEFAULT: predict, SignatureKeys.PREDICT: predict}
        regress = RegressionOutput(value=predictions[P.PREDICTIONS])
        return {SignatureKeys.SERVING_DEFAULT: regress, SignatureKeys.REGRESS: regress,
                SignatureKeys.PREDICT: predict}
