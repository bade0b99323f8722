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


class PoissonRegressionHead(RegressionHead):
    """Poisson regression of counts: the logits are log-rates, the predictions `exp(logits)`, the loss
    `tf.nn.log_poisson_loss` (a generalized linear model with the log link).

    Args:
        label_dimension, weight_column, loss_reduction, name: As for `RegressionHead`.
        compute_full_loss: Include the constant Stirling term of log(labels!) in the loss (see
            `tf.nn.log_poisson_loss`); it changes the loss's value, not its gradients.

    Predictions: `predictions` (the rates) and `logits`. Metrics as `RegressionHead`'s.
    """

    def __init__(self, label_dimension: int = 1, weight_column=None, loss_reduction: str = "sum_over_batch_size",
                 compute_full_loss: bool = True, name: str | None = None):
        self._compute_full_loss = bool(compute_full_loss)
        super().__init__(label_dimension, weight_column, loss_reduction, None, tf.math.exp, name)

    def _unweighted_loss(self, labels, logits):
        return tf.nn.log_poisson_loss(targets=labels, log_input=logits, compute_full_loss=self._compute_full_loss)


class LogisticRegressionHead(RegressionHead):
    """Regression of a probability in [0, 1] (the logistic link): sigmoid cross-entropy like `BinaryClassHead`,
    but with float labels, only `logits` and `predictions` (= sigmoid(logits)) predicted, the regression metrics,
    and a regression signature by default.

    Args:
        weight_column, loss_reduction, name: As for `RegressionHead`.
    """

    def __init__(self, weight_column=None, loss_reduction: str = "sum_over_batch_size", name: str | None = None):
        super().__init__(1, weight_column, loss_reduction, None, tf.math.sigmoid, name)

    def _labels(self, labels, logits):
        labels = super()._labels(labels, logits)
        checks = [tf.debugging.assert_greater_equal(labels, 0.0, message="LogisticRegressionHead: labels must be "
                                                    "in [0, 1]; got one below 0"),
                  tf.debugging.assert_less_equal(labels, 1.0, message="LogisticRegressionHead: labels must be in "
                                                 "[0, 1]; got one above 1")]
        with tf.control_dependencies(checks):
            return tf.identity(labels)

    def _unweighted_loss(self, labels, logits):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
