"""`SequentialHead`: a one-task head applied at every real step of a sequence, for RNNs with `return_sequences`.

The model's logits are [batch, time, d] and the labels [batch, time] (dense, or sparse as parsed variable-length
sequences come). A [batch, time] boolean mask, `features[mask_key]`, says which steps are real; padding steps
count in neither the loss nor the metrics. As in tf.estimator 2.15:

* the loss and metrics are the wrapped head's, over the real steps taken as examples (a weight column is read
  per step, from a [batch, time] feature);
* predictions are per step, [batch, time, ...], except the class lists (`all_class_ids`, `all_classes`),
  which are the same at every step and given once per example; the mask is added as `mask_key`.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from elastimator.errors import HeadError
from elastimator.estimator import EstimatorSpec, ModeKeys
from elastimator.export.outputs import PredictOutput
from elastimator.premade.head import ConcreteHead, Head
from elastimator.premade.keys import PredictionKeys, SignatureKeys

_PER_EXAMPLE = (PredictionKeys.ALL_CLASS_IDS, PredictionKeys.ALL_CLASSES)


class SequentialHead(Head):
    """Wraps a one-task `head` so that it scores every real step of a sequence.

    Args:
        head: The per-step head (`BinaryClassHead`, `MultiClassHead`, `RegressionHead`, ...).
        mask_key: The feature holding the [batch, time] mask of real steps; the model puts it there.
    """

    def __init__(self, head: Head, mask_key: str = "sequence_mask"):
        if not isinstance(head, ConcreteHead):
            raise HeadError(f"return_sequences needs a head of one task (BinaryClassHead, MultiClassHead, "
                            f"RegressionHead, ...); got {type(head).__name__}.")
        super().__init__(name=head.name, loss_reduction=head.loss_reduction)
        self._head = head
        self._mask_key = mask_key

    @property
    def logits_dimension(self) -> int:
        return self._head.logits_dimension

    @property
    def mask_key(self) -> str:
        return self._mask_key

    # --- per step -----------------------------------------------------------------------------

    def _mask(self, features) -> tf.Tensor:
        if not isinstance(features, Mapping) or self._mask_key not in features:
            raise HeadError(f"SequentialHead: features need the [batch, time] step mask {self._mask_key!r}.")
        return tf.cast(features[self._mask_key], tf.bool)

    def _steps(self, features, logits, labels):
        """The real steps as examples: (features, [n, d] logits, [n, 1] labels) for the wrapped head."""
        mask = self._mask(features)
        logits = tf.boolean_mask(_checked_logits(logits, self.logits_dimension), mask)
        if isinstance(labels, tf.SparseTensor):
            labels = tf.sparse.to_dense(labels)
        labels = tf.convert_to_tensor(labels)
        if labels.shape.rank == 3:
            labels = tf.squeeze(labels, axis=-1) if labels.shape[-1] == 1 else labels
        if labels.shape.rank not in (2, 3):
            raise HeadError(f"SequentialHead: expected labels [batch, time] (one per step); got {labels.shape}.")
        labels = tf.boolean_mask(labels, mask)
        if labels.shape.rank == 1:
            labels = tf.expand_dims(labels, -1)
        weight_key = self._head._weight_key  # pylint: disable=protected-access  (same package)
        step_features = {}
        if weight_key is not None:
            if weight_key not in features:
                raise HeadError(f"weight_column {weight_key!r} is not among the features {sorted(features)}.")
            weights = features[weight_key]
            if isinstance(weights, tf.SparseTensor):
                weights = tf.sparse.to_dense(weights)
            step_features[weight_key] = tf.boolean_mask(weights, mask)
        return step_features, logits, labels

    def predictions(self, logits, keys=None) -> dict:
        """Per-step predictions, [batch, time, ...], for logits [batch, time, d]."""
        logits = _checked_logits(logits, self.logits_dimension)
        shape = tf.shape(logits)
        flat = self._head.predictions(tf.reshape(logits, [-1, self.logits_dimension]), keys)
        result = {}
        for key, value in flat.items():
            value = tf.reshape(value, tf.concat([shape[:2], tf.shape(value)[1:]], axis=0))
            result[key] = value[:, 0] if key in _PER_EXAMPLE else value
        return result

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None) -> tf.Tensor:
        step_features, logits, labels = self._steps(features, logits, labels)
        return self._head.loss(labels, logits, step_features, mode, regularization_losses)

    def metrics(self, regularization_losses=None) -> dict:
        return self._head.metrics(regularization_losses)

    def update_metrics(self, eval_metrics, features, logits, labels, mode=None, regularization_losses=None):
        del mode
        step_features, logits, labels = self._steps(features, logits, labels)
        return self._head.update_metrics(eval_metrics, step_features, logits, labels,
                                         regularization_losses=regularization_losses)

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None) -> EstimatorSpec:
        predictions = {**self.predictions(logits), self._mask_key: self._mask(features)}
        if mode == ModeKeys.PREDICT:
            served = PredictOutput({k: v for k, v in predictions.items() if k != self._mask_key})
            return EstimatorSpec(mode, predictions=predictions, export_outputs={
                SignatureKeys.SERVING_DEFAULT: served, SignatureKeys.PREDICT: served})
        if labels is None:
            raise HeadError(f"SequentialHead: mode {mode!r} needs labels, but input_fn returned none.")
        step_features, step_logits, step_labels = self._steps(features, logits, labels)
        spec = self._head.create_estimator_spec(
            step_features, mode, step_logits, step_labels, optimizer=optimizer,
            trainable_variables=trainable_variables, train_op_fn=train_op_fn, update_ops=update_ops,
            regularization_losses=regularization_losses)
        return spec._replace(predictions=predictions)


def _checked_logits(logits, dimension: int) -> tf.Tensor:
    logits = tf.convert_to_tensor(logits)
    if logits.shape.rank != 3 or (logits.shape[-1] is not None and logits.shape[-1] != dimension):
        raise HeadError(f"SequentialHead: expected logits of shape [batch, time, {dimension}]; got {logits.shape}.")
    return logits
