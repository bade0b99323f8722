"""`Head`: turns logits into predictions, a loss, metrics, a train op and serving signatures.

A head owns everything a model does after its last layer, so a canned estimator
(or a user's model_fn) only computes logits and calls
`head.create_estimator_spec(features, mode, logits, labels, optimizer=...)`.
The concrete heads live in `classification.py` and `regression.py`.
"""

from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, Iterable, Mapping

import tensorflow as tf

from elastimator import optimizers
from elastimator.errors import ConfigError, HeadError
from elastimator.estimator import EstimatorSpec, ModeKeys
from elastimator.premade import head_metrics
from elastimator.premade.keys import MetricKeys

_Reduction = tf.compat.v1.losses.Reduction

LOSS_REDUCTIONS = {
    # Keras / TF2 spellings (what tf.estimator's v2 heads took) ...
    "sum": _Reduction.SUM,
    "sum_over_batch_size": _Reduction.SUM_OVER_BATCH_SIZE,
    # ... and tf.compat.v1.losses.Reduction's (what its v1 canned estimators took).
    _Reduction.SUM: _Reduction.SUM,
    _Reduction.SUM_OVER_BATCH_SIZE: _Reduction.SUM_OVER_BATCH_SIZE,
    _Reduction.MEAN: _Reduction.MEAN,
    _Reduction.SUM_BY_NONZERO_WEIGHTS: _Reduction.SUM_BY_NONZERO_WEIGHTS,
}
"""Accepted `loss_reduction` values -> the tf.compat.v1.losses reduction they mean."""


def loss_reduction_of(value: str) -> str:
    """Normalizes a `loss_reduction` argument, or raises naming the accepted values."""
    if value not in LOSS_REDUCTIONS:
        raise ConfigError(f"loss_reduction: expected one of {sorted(LOSS_REDUCTIONS)}; got {value!r}.")
    return LOSS_REDUCTIONS[value]


class Head(abc.ABC):
    """What every head offers (tf.estimator 2.15's `Head` interface): a model's logits in, its predictions,
    loss, metrics and `EstimatorSpec` out. `ConcreteHead` implements it for one task, `MultiHead` merges
    several; subclass `ConcreteHead` for a head of your own.
    """

    def __init__(self, *, name: str | None = None, loss_reduction: str = "sum_over_batch_size"):
        self._name = name
        self._reduction = loss_reduction_of(loss_reduction)  # the tf.compat.v1.losses reduction it means
        self._loss_reduction = loss_reduction

    @property
    def name(self) -> str | None:
        """The head's name: it suffixes the head's metric keys (`"accuracy/<name>"`)."""
        return self._name

    @property
    def loss_reduction(self) -> str:
        """The `loss_reduction` as given (`"sum_over_batch_size"` by default, as in 2.15)."""
        return self._loss_reduction

    @property
    @abc.abstractmethod
    def logits_dimension(self) -> int:
        """Size of the last dimension of the logits this head expects."""

    @abc.abstractmethod
    def predictions(self, logits, keys=None) -> dict:
        """The predictions for `logits`: all of them, or those named in `keys`."""

    @abc.abstractmethod
    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None) -> tf.Tensor:
        """The scalar training loss."""

    @abc.abstractmethod
    def metrics(self, regularization_losses=None) -> dict:
        """New Keras metric objects for an evaluation, keyed as the head's evaluation keys its metrics."""

    @abc.abstractmethod
    def update_metrics(self, eval_metrics, features, logits, labels, mode=None, regularization_losses=None):
        """Updates `eval_metrics` (from `metrics()`) with one batch; returns it."""

    @abc.abstractmethod
    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn=None, update_ops=None, regularization_losses=None) -> EstimatorSpec:
        """The `EstimatorSpec` for `mode`, given the model's `logits`."""


class ConcreteHead(Head):
    """The base of the heads of one task: the shared loss, weighting, metrics, train-op and EstimatorSpec logic.

    Args:
        name: Suffix for metric keys (`"accuracy/<name>"`), for models with several heads.
        weight_column: Feature key (or `tf.feature_column.numeric_column`) of per-example weights.
        loss_reduction: How per-example losses become the training loss; see `LOSS_REDUCTIONS`.
            Default `"sum_over_batch_size"` (the weighted sum divided by the batch size).
        loss_fn: A per-example loss in place of the head's own: called as `loss_fn(labels, logits)`, with
            `features` and `loss_reduction` too where it names them, and returning [batch, 1]. It gets the
            labels as the head prepared them (class ids for a vocabulary, multi-hot for multi-label).
    """

    def __init__(self, *, name: str | None = None, weight_column=None,
                 loss_reduction: str = "sum_over_batch_size", loss_fn: Callable | None = None):
        super().__init__(name=name, loss_reduction=loss_reduction)
        self._weight_key = _weight_key(weight_column)
        if loss_fn is not None and not callable(loss_fn):
            raise ConfigError(f"loss_fn: expected a function (labels, logits) -> per-example loss; got {loss_fn!r}.")
        self._loss_fn = loss_fn

    # --- what a concrete head defines -------------------------------------------------------

    @abc.abstractmethod
    def _predictions(self, logits: tf.Tensor) -> dict[str, tf.Tensor]:
        """The predictions dict (keys from `PredictionKeys`) for checked `logits` [batch, logits_dimension]."""

    @abc.abstractmethod
    def _labels(self, labels, logits: tf.Tensor) -> tf.Tensor:
        """`labels` checked and converted to what `_unweighted_loss` and the metrics take."""

    @abc.abstractmethod
    def _unweighted_loss(self, labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        """Per-example loss, [batch, 1] (or [batch, d] for a d-dimensional regression)."""

    @abc.abstractmethod
    def _metric_ops(self, labels, predictions, unweighted_loss, weights) -> dict[str, tuple]:
        """The head's eval metrics, (value, update_op) pairs keyed by `MetricKeys`.

        `weights` is the [batch, 1] weights tensor, or None when the head has no weight column.
        """

    @abc.abstractmethod
    def export_outputs(self, predictions: Mapping[str, tf.Tensor]) -> dict:
        """The serving signatures (`serving_default` first) for `predictions`."""

    @abc.abstractmethod
    def _keras_metrics(self) -> dict:
        """The head's own Keras metric objects for `metrics()`, by unsuffixed key (see `head_metrics`)."""

    @abc.abstractmethod
    def _update_keras_metrics(self, metrics: Mapping, labels, predictions, weights) -> None:
        """Updates `_keras_metrics()`'s objects (by unsuffixed key); `weights` is [batch, 1] or None."""

    # --- shared behaviour -------------------------------------------------------------------

    def predictions(self, logits, keys=None) -> dict[str, tf.Tensor]:
        """The predictions for `logits` [batch, logits_dimension]: all of them, or those named in `keys`."""
        predictions = self._predictions(self._check_logits(logits))
        if keys is None:
            return predictions
        keys = [keys] if isinstance(keys, str) else list(keys)
        unknown = [key for key in keys if key not in predictions]
        if unknown:
            raise HeadError(f"{type(self).__name__}.predictions: unknown keys {unknown}; expected some of "
                            f"{sorted(predictions)}.")
        return {key: predictions[key] for key in keys}

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None) -> tf.Tensor:
        """The scalar training loss: reduced weighted per-example loss plus regularization."""
        del mode  # Same loss in every mode; kept for tf.estimator's signature.
        logits = self._check_logits(logits)
        labels = self._labels(labels, logits)
        unweighted = self._per_example_loss(labels, logits, features)
        weights = self._weights(features, unweighted)
        return self._training_loss(unweighted, weights, regularization_losses)

    def metrics(self, regularization_losses=None) -> dict:
        """New Keras metric objects for an evaluation, keyed as the head's evaluation keys its metrics; pass them
        to `update_metrics`. With `regularization_losses`, also their mean."""
        metrics = {MetricKeys.LOSS_MEAN: head_metrics.mean(MetricKeys.LOSS_MEAN), **self._keras_metrics()}
        if regularization_losses is not None:
            metrics[MetricKeys.LOSS_REGULARIZATION] = head_metrics.mean(MetricKeys.LOSS_REGULARIZATION)
        return {self._key(key): metric for key, metric in metrics.items()}

    def update_metrics(self, eval_metrics, features, logits, labels, regularization_losses=None):
        """Updates `eval_metrics` (from `metrics()`) with one batch; returns it. (2.15's concrete heads took no
        `mode` here, its base class did.)"""
        logits = self._check_logits(logits)
        labels = self._labels(labels, logits)
        unweighted = self._per_example_loss(labels, logits, features)
        weights = self._weights(features, unweighted)
        weights = None if isinstance(weights, float) else weights
        unsuffixed = {self._unkey(key): metric for key, metric in eval_metrics.items()}
        unsuffixed[MetricKeys.LOSS_MEAN].update_state(
            unweighted, sample_weight=None if weights is None else _broadcast(weights, unweighted))
        self._update_keras_metrics(unsuffixed, labels, self._predictions(logits), weights)
        if regularization_losses is not None:
            unsuffixed[MetricKeys.LOSS_REGULARIZATION].update_state(tf.add_n(list(regularization_losses)))
        return eval_metrics

    def _per_example_loss(self, labels, logits, features) -> tf.Tensor:
        if self._loss_fn is None:
            return self._unweighted_loss(labels, logits)
        offered = {"labels": self._loss_fn_labels(labels, logits), "logits": logits, "features": features,
                   "loss_reduction": self._loss_reduction}
        loss = tf.convert_to_tensor(self._loss_fn(**_accepted(self._loss_fn, offered)))
        if loss.shape.rank == 1:
            loss = tf.expand_dims(loss, -1)
        return tf.cast(loss, tf.float32)

    def _loss_fn_labels(self, labels, logits):
        """The labels a custom `loss_fn` gets (the head's prepared labels; heads change the dtype where 2.15 did)."""
        del logits
        return labels

    def create_estimator_spec(
        self,
        features: Mapping[str, Any],
        mode: str,
        logits,
        labels=None,
        optimizer=None,
        trainable_variables: Iterable[tf.Variable] | None = None,
        train_op_fn: Callable[[tf.Tensor], tf.Operation] | None = None,
        update_ops: Iterable[tf.Operation] | None = None,
        regularization_losses: Iterable[tf.Tensor] | None = None,
    ) -> EstimatorSpec:
        """The `EstimatorSpec` for `mode`, given the model's `logits`.

        Args:
            features: The features dict (weights are read from it).
            mode: A `ModeKeys` value.
            logits: Float tensor [batch, logits_dimension].
            labels: Labels tensor; required in TRAIN and EVAL.
            optimizer: A `tf.compat.v1.train.Optimizer` or a tf-keras legacy optimizer (its
                `iterations` become the global step) that minimizes the loss over
                `trainable_variables` (all trainable variables when None) ...
            train_op_fn: ... or a function from the loss to the train op. Exactly one in TRAIN.
            update_ops: Ops to run with each train step (batch-norm statistics); defaults to the
                graph's UPDATE_OPS collection.
            regularization_losses: Scalars added to the training loss.

        Returns:
            A validated `EstimatorSpec`.
        """
        logits = self._check_logits(logits)
        predictions = self._predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs=self.export_outputs(predictions))
        if labels is None:
            raise HeadError(f"Head: mode {mode!r} needs labels, but input_fn returned none. "
                            "Return (features, labels) from input_fn for train and evaluate.")
        labels = self._labels(labels, logits)
        unweighted = self._per_example_loss(labels, logits, features)
        weights = self._weights(features, unweighted)
        loss = self._training_loss(unweighted, weights, regularization_losses)
        if mode == ModeKeys.EVAL:
            metrics = self._metric_ops(labels, predictions, unweighted, None if isinstance(weights, float) else weights)
            metrics[MetricKeys.LOSS_MEAN] = tf.compat.v1.metrics.mean(
                unweighted, weights=_broadcast(weights, unweighted))
            if regularization_losses:
                metrics[MetricKeys.LOSS_REGULARIZATION] = tf.compat.v1.metrics.mean(
                    tf.add_n(list(regularization_losses)))
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops={self._key(k): v for k, v in metrics.items()})
        tf.compat.v1.summary.scalar(self._key(MetricKeys.LOSS_MEAN),
                                    tf.reduce_mean(unweighted * _broadcast(weights, unweighted)))
        train_op = _train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops)
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    # --- helpers for subclasses -------------------------------------------------------------

    def _key(self, metric: str) -> str:
        return f"{metric}/{self._name}" if self._name else metric

    def _unkey(self, key: str) -> str:
        return key.removesuffix(f"/{self._name}") if self._name else key

    def _check_logits(self, logits) -> tf.Tensor:
        logits = tf.convert_to_tensor(logits)
        if not logits.dtype.is_floating:
            raise HeadError(f"{type(self).__name__}: logits must be a float tensor; got dtype {logits.dtype.name}.")
        if logits.shape.rank == 1 and self.logits_dimension == 1:
            logits = tf.expand_dims(logits, -1)
        dimension = logits.shape[-1] if logits.shape.rank else None
        if logits.shape.rank != 2 or (dimension is not None and dimension != self.logits_dimension):
            raise HeadError(
                f"{type(self).__name__}: expected logits of shape [batch, {self.logits_dimension}]; got "
                f"{logits.shape}. Make the model's last layer output {self.logits_dimension} unit(s), or "
                f"configure the head for {dimension} (n_classes / label_dimension)."
            )
        return logits

    def _weights(self, features, unweighted: tf.Tensor) -> tf.Tensor | float:
        if self._weight_key is None:
            return 1.0
        if not isinstance(features, Mapping) or self._weight_key not in features:
            present = sorted(features) if isinstance(features, Mapping) else type(features).__name__
            raise HeadError(f"weight_column {self._weight_key!r} is not among the features {present}. "
                            "Add it to what input_fn returns, or drop weight_column.")
        weights = tf.cast(features[self._weight_key], tf.float32)
        if isinstance(weights, tf.SparseTensor):
            raise HeadError(f"weight_column {self._weight_key!r} must be a dense tensor; got a SparseTensor.")
        return tf.reshape(weights, [-1, 1])

    def _training_loss(self, unweighted, weights, regularization_losses) -> tf.Tensor:
        loss = tf.compat.v1.losses.compute_weighted_loss(
            unweighted, weights=_broadcast(weights, unweighted), reduction=self._reduction,
            loss_collection=None)
        if regularization_losses:
            loss = loss + tf.add_n(list(regularization_losses))
        return loss


def _accepted(fn: Callable, offered: dict) -> dict:
    """The arguments of `offered` that `fn` names (all of them when it takes **kwargs)."""
    parameters = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return offered
    return {name: value for name, value in offered.items() if name in parameters}


def _weight_key(weight_column) -> str | None:
    if weight_column is None or isinstance(weight_column, str):
        return weight_column
    key = getattr(weight_column, "key", None)
    if isinstance(key, str):
        return key
    raise ConfigError("weight_column: expected a feature key (str) or tf.feature_column.numeric_column; "
                      f"got {weight_column!r}.")


def _broadcast(weights, values: tf.Tensor):
    if isinstance(weights, float):
        return weights
    return weights * tf.ones_like(values)


def _train_op(loss, optimizer, trainable_variables, train_op_fn, update_ops) -> tf.Operation:
    if (optimizer is None) == (train_op_fn is None):
        raise ConfigError("Head.create_estimator_spec in TRAIN needs exactly one of optimizer or train_op_fn; got "
                          f"{'both' if optimizer is not None else 'neither'}.")
    if update_ops is None:
        update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(list(update_ops)):
        if train_op_fn is not None:
            return train_op_fn(loss)
        optimizer = optimizers.get_optimizer_instance(optimizer)
        return optimizers.minimize(optimizer, loss, None if trainable_variables is None else list(trainable_variables),
                                   tf.compat.v1.train.get_global_step())
