"""Classification heads: binary (sigmoid), multi-class (softmax), multi-label (sigmoid per class)."""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from elastimator.errors import ConfigError, HeadError
from elastimator.export.outputs import ClassificationOutput, PredictOutput, RegressionOutput
from elastimator.premade import head_metrics
from elastimator.premade.head import ConcreteHead
from elastimator.premade.keys import MetricKeys, PredictionKeys, SignatureKeys

_metrics = tf.compat.v1.metrics
P = PredictionKeys


def _check_vocabulary(label_vocabulary, n_classes: int) -> tuple[str, ...] | None:
    if label_vocabulary is None:
        return None
    vocabulary = tuple(label_vocabulary)
    if len(vocabulary) != n_classes or not all(isinstance(v, str) for v in vocabulary):
        raise ConfigError(f"label_vocabulary: expected {n_classes} strings (one per class); got {vocabulary!r}.")
    if len(set(vocabulary)) != len(vocabulary):
        raise ConfigError(f"label_vocabulary has duplicates: {vocabulary!r}.")
    return vocabulary


def _check_thresholds(thresholds) -> tuple[float, ...]:
    thresholds = tuple(thresholds or ())
    for threshold in thresholds:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold < 1.0:
            raise ConfigError(f"thresholds: each must be a number in (0, 1); got {threshold!r}.")
    return thresholds


def _at_thresholds(labels, probabilities, weights, thresholds) -> dict[str, tuple]:
    """`accuracy`, `precision` and `recall` at each threshold, keyed `<metric>/positive_threshold_<t>`."""
    metrics = {}
    for threshold in thresholds:
        suffix = head_metrics.threshold_suffix(threshold)
        metrics[MetricKeys.ACCURACY + suffix] = _metrics.accuracy(
            labels, tf.cast(probabilities >= threshold, tf.int64), weights=weights)
        for key, at_thresholds in ((MetricKeys.PRECISION, _metrics.precision_at_thresholds),
                                   (MetricKeys.RECALL, _metrics.recall_at_thresholds)):
            value, update = at_thresholds(labels, probabilities, [threshold], weights=weights)
            metrics[key + suffix] = (tf.squeeze(value), update)
    return metrics


def _dense_labels(labels, head: str) -> tf.Tensor:
    if isinstance(labels, dict):
        raise HeadError(f"{head}: labels must be one tensor; got a dict with keys {sorted(labels)}. "
                        "Return a single label tensor from input_fn (or use a head per label).")
    if isinstance(labels, tf.SparseTensor):
        raise HeadError(f"{head}: labels must be dense; got a SparseTensor.")
    return tf.convert_to_tensor(labels)


def _as_column(labels: tf.Tensor, logits: tf.Tensor, head: str) -> tf.Tensor:
    """Labels [batch] or [batch, 1] as [batch, 1], checked against the logits' batch size."""
    if labels.shape.rank == 1:
        labels = tf.expand_dims(labels, -1)
    if labels.shape.rank != 2 or (labels.shape[-1] is not None and labels.shape[-1] != 1):
        raise HeadError(f"{head}: expected labels of shape [batch] or [batch, 1]; got {labels.shape}.")
    check = tf.debugging.assert_equal(
        tf.shape(labels)[0], tf.shape(logits)[0],
        message=f"{head}: labels and logits have different batch sizes")
    with tf.control_dependencies([check]):
        return tf.identity(labels)


def _class_ids(labels: tf.Tensor, n_classes: int, vocabulary, head: str) -> tf.Tensor:
    """Labels as int64 class ids in [0, n_classes), with a runtime check that names the fix."""
    if labels.dtype == tf.string:
        if vocabulary is None:
            raise HeadError(f"{head}: labels are strings; pass label_vocabulary=[...] listing the "
                            f"{n_classes} class names, or feed integer class ids.")
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(list(vocabulary), tf.range(len(vocabulary), dtype=tf.int64)),
            default_value=-1, name="label_vocabulary")
        ids = table.lookup(labels)
        known = tf.debugging.assert_non_negative(
            ids, message=f"{head}: a label is not in label_vocabulary {list(vocabulary)}")
        with tf.control_dependencies([known]):
            return tf.identity(ids)  # Lookup ids are in [0, n_classes) by construction.
    if vocabulary is not None:
        raise HeadError(f"{head}: label_vocabulary was given, so labels must be strings; got {labels.dtype.name}.")
    if not (labels.dtype.is_integer or labels.dtype.is_floating or labels.dtype == tf.bool):
        raise HeadError(f"{head}: labels must be integer class ids; got dtype {labels.dtype.name}.")
    ids = tf.cast(labels, tf.int64)
    check = tf.debugging.assert_equal(
        tf.cast(ids, labels.dtype) if labels.dtype != tf.bool else labels, labels,
        message=f"{head}: labels must be whole class ids")
    in_range = tf.debugging.assert_less(
        ids, tf.constant(n_classes, tf.int64),
        message=f"{head}: labels must be class ids in [0, {n_classes}) (n_classes={n_classes}); "
                "got a label >= n_classes")
    non_negative = tf.debugging.assert_non_negative(ids, message=f"{head}: labels must be >= 0")
    with tf.control_dependencies([check, in_range, non_negative]):
        return tf.identity(ids)


def _class_names(n_classes: int, vocabulary) -> tf.Tensor:
    names = list(vocabulary) if vocabulary else [str(i) for i in range(n_classes)]
    return tf.constant(names)


def _tiled(row: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """`row` [n] repeated for each example: [batch, n]."""
    return tf.tile(tf.expand_dims(row, 0), [tf.shape(logits)[0], 1])


def _all_classes(n_classes: int, vocabulary, logits: tf.Tensor) -> dict[str, tf.Tensor]:
    """The `all_class_ids` and `all_classes` predictions: every class's id and name, per example."""
    return {P.ALL_CLASS_IDS: _tiled(tf.range(n_classes, dtype=tf.int32), logits),
            P.ALL_CLASSES: _tiled(_class_names(n_classes, vocabulary), logits)}


def _classification_outputs(predictions) -> dict:
    """serving_default and classification (scores and names of every class), plus predict."""
    classify = ClassificationOutput(scores=predictions[P.PROBABILITIES], classes=predictions[P.ALL_CLASSES])
    return {SignatureKeys.SERVING_DEFAULT: classify, SignatureKeys.CLASSIFY: classify,
            SignatureKeys.PREDICT: PredictOutput(predictions)}


def _once_over_replicas(fn, *values):
    """`fn(*values)`, computed once where a strategy calls the model_fn per replica (in its cross-replica context):
    a value derived from metrics that aggregate over the replicas stays one value, where computed in each replica
    it would be one per replica (equal, but not one). Without a strategy, `fn(*values)`."""
    context = tf.distribute.get_replica_context()
    if context is None:  # already in a cross-replica context
        return fn(*values)
    return context.merge_call(lambda _strategy, *merged: fn(*merged), args=values)


class _SingleLabelClassHead(ConcreteHead):
    """What the binary and multi-class heads share: class ids, class names, classification signatures."""

    def __init__(self, n_classes: int, *, label_vocabulary: Sequence[str] | None = None, **kwargs):
        super().__init__(**kwargs)
        self._n_classes = n_classes
        self._vocabulary = _check_vocabulary(label_vocabulary, n_classes)

    @property
    def n_classes(self) -> int:
        return self._n_classes

    def _add_classes(self, predictions: dict, logits: tf.Tensor, class_ids: tf.Tensor) -> dict:
        predictions[P.CLASS_IDS] = class_ids
        predictions[P.CLASSES] = tf.gather(_class_names(self._n_classes, self._vocabulary), class_ids)
        predictions.update(_all_classes(self._n_classes, self._vocabulary, logits))
        return predictions

    def _labels(self, labels, logits):
        labels = _as_column(_dense_labels(labels, type(self).__name__), logits, type(self).__name__)
        return _class_ids(labels, self._n_classes, self._vocabulary, type(self).__name__)

    def export_outputs(self, predictions):
        return _classification_outputs(predictions)


class BinaryClassHead(_SingleLabelClassHead):
    """Two classes, one logit, sigmoid cross-entropy.

    Args:
        weight_column, loss_reduction, loss_fn, name: See `Head` (`loss_fn` gets float labels).
        label_vocabulary: Two class names when labels are strings (the second is the positive class).
        thresholds: Extra decision thresholds for `accuracy`/`precision`/`recall` metrics
            (`"precision/positive_threshold_0.7"`, ...). 0.5 is always reported unsuffixed.

    Predictions: `logits`, `logistic`, `probabilities`, `class_ids`, `classes`,
    `all_class_ids`, `all_classes`. Metrics: `accuracy`, `accuracy_baseline`, `auc`,
    `auc_precision_recall`, `precision`, `recall`, `label/mean`, `prediction/mean`,
    `average_loss`, `loss`.
    """

    def __init__(self, weight_column=None, thresholds: Sequence[float] | None = None, label_vocabulary=None,
                 loss_reduction: str = "sum_over_batch_size", loss_fn=None, name: str | None = None):
        super().__init__(2, label_vocabulary=label_vocabulary, weight_column=weight_column,
                         loss_reduction=loss_reduction, loss_fn=loss_fn, name=name)
        self._thresholds = _check_thresholds(thresholds)

    @property
    def logits_dimension(self) -> int:
        return 1

    def _loss_fn_labels(self, labels, logits):
        return tf.cast(labels, logits.dtype)

    def _predictions(self, logits):
        logistic = tf.sigmoid(logits)
        predictions = {P.LOGITS: logits, P.LOGISTIC: logistic,
                       P.PROBABILITIES: tf.concat([1.0 - logistic, logistic], axis=1)}
        class_ids = tf.cast(tf.greater(logits, 0.0), tf.int64)
        return self._add_classes(predictions, logits, class_ids)

    def _unweighted_loss(self, labels, logits):
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, logits.dtype), logits=logits)

    def _metric_ops(self, labels, predictions, unweighted_loss, weights):
        labels_f = tf.cast(labels, tf.float32)
        logistic = predictions[P.LOGISTIC]
        label_mean = _metrics.mean(labels_f, weights=weights, name="label_mean")
        metrics = {
            MetricKeys.ACCURACY: _metrics.accuracy(labels, predictions[P.CLASS_IDS], weights=weights),
            MetricKeys.PRECISION: _metrics.precision(labels, predictions[P.CLASS_IDS], weights=weights),
            MetricKeys.RECALL: _metrics.recall(labels, predictions[P.CLASS_IDS], weights=weights),
            MetricKeys.LABEL_MEAN: label_mean,
            MetricKeys.ACCURACY_BASELINE: (_once_over_replicas(lambda mean: tf.maximum(mean, 1.0 - mean),
                                                               label_mean[0]), label_mean[1]),
            MetricKeys.PREDICTION_MEAN: _metrics.mean(logistic, weights=weights, name="prediction_mean"),
            MetricKeys.AUC: _metrics.auc(labels, logistic, weights=weights, name="auc"),
            MetricKeys.AUC_PR: _metrics.auc(labels, logistic, weights=weights, curve="PR",
                                            summation_method="careful_interpolation", name="auc_pr"),
        }
        metrics.update(_at_thresholds(labels, logistic, weights, self._thresholds))
        return metrics

    def _keras_metrics(self):
        return head_metrics.binary(self._thresholds)

    def _update_keras_metrics(self, metrics, labels, predictions, weights):
        head_metrics.update_binary(metrics, labels, predictions[P.CLASS_IDS], predictions[P.LOGISTIC], weights,
                                   self._thresholds)

    def export_outputs(self, predictions):
        outputs = super().export_outputs(predictions)
        outputs[SignatureKeys.REGRESS] = RegressionOutput(value=predictions[P.LOGISTIC])
        return outputs


class MultiClassHead(_SingleLabelClassHead):
    """n_classes > 2, one logit per class, softmax cross-entropy.

    Args:
        n_classes: Number of classes (> 2; use `BinaryClassHead` for two).
        weight_column, loss_reduction, loss_fn, name: See `Head` (`loss_fn` gets class ids [batch, 1]).
        label_vocabulary: The class names when labels are strings, in class-id order.

    Predictions: `logits`, `probabilities`, `class_ids`, `classes`, `all_class_ids`,
    `all_classes`. Metrics: `accuracy`, `average_loss`, `loss`.
    """

    def __init__(self, n_classes: int, weight_column=None, label_vocabulary=None,
                 loss_reduction: str = "sum_over_batch_size", loss_fn=None, name: str | None = None):
        if not isinstance(n_classes, int) or n_classes <= 2:
            raise ConfigError(f"MultiClassHead: n_classes must be an int > 2; got {n_classes!r}. "
                              "Use BinaryClassHead for two classes.")
        super().__init__(n_classes, label_vocabulary=label_vocabulary, weight_column=weight_column,
                         loss_reduction=loss_reduction, loss_fn=loss_fn, name=name)

    @property
    def logits_dimension(self) -> int:
        return self._n_classes

    def _predictions(self, logits):
        predictions = {P.LOGITS: logits, P.PROBABILITIES: tf.nn.softmax(logits)}
        class_ids = tf.expand_dims(tf.argmax(logits, axis=1), -1)
        return self._add_classes(predictions, logits, class_ids)

    def _unweighted_loss(self, labels, logits):
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.squeeze(labels, -1), logits=logits)
        return tf.expand_dims(losses, -1)

    def _metric_ops(self, labels, predictions, unweighted_loss, weights):
        return {MetricKeys.ACCURACY: _metrics.accuracy(labels, predictions[P.CLASS_IDS], weights=weights)}

    def _keras_metrics(self):
        return {MetricKeys.ACCURACY: tf.keras.metrics.Accuracy(name=MetricKeys.ACCURACY)}

    def _update_keras_metrics(self, metrics, labels, predictions, weights):
        metrics[MetricKeys.ACCURACY].update_state(labels, predictions[P.CLASS_IDS], sample_weight=weights)


class MultiLabelHead(ConcreteHead):
    """Each example may belong to any subset of n_classes classes: a sigmoid per class.

    Labels are multi-hot [batch, n_classes] (0/1), or a SparseTensor of class ids (or of
    class names with `label_vocabulary`).

    Args:
        n_classes: Number of classes (>= 2).
        weight_column, loss_reduction, loss_fn, name: See `Head` (`loss_fn` gets multi-hot int64 labels and may
            take `features`).
        thresholds: Decision thresholds to report `accuracy`, `precision` and `recall` at
            (`"recall/positive_threshold_0.7"`, ...).
        label_vocabulary: Class names, for string labels.
        classes_for_class_based_metrics: Class ids or names to report `auc/class<k>`,
            `auc_precision_recall/class<k>` and `probability_mean/class<k>` for.

    Predictions: `logits`, `probabilities`, `classes` (every class name, per example). Metrics: `auc`,
    `auc_precision_recall`, `average_loss`, `loss`, and those of the thresholds and classes asked for.
    """

    def __init__(self, n_classes: int, weight_column=None, thresholds: Sequence[float] | None = None,
                 label_vocabulary=None, loss_reduction: str = "sum_over_batch_size", loss_fn=None,
                 classes_for_class_based_metrics=None, name: str | None = None):
        if not isinstance(n_classes, int) or n_classes < 2:
            raise ConfigError(f"MultiLabelHead: n_classes must be an int >= 2; got {n_classes!r}.")
        super().__init__(weight_column=weight_column, loss_reduction=loss_reduction, loss_fn=loss_fn, name=name)
        self._n_classes = n_classes
        self._thresholds = _check_thresholds(thresholds)
        self._vocabulary = _check_vocabulary(label_vocabulary, n_classes)
        self._class_metrics = tuple(self._class_index(c) for c in classes_for_class_based_metrics or ())

    def _class_index(self, cls) -> int:
        if isinstance(cls, str):
            if not self._vocabulary or cls not in self._vocabulary:
                raise ConfigError(f"classes_for_class_based_metrics: {cls!r} is not in label_vocabulary "
                                  f"{self._vocabulary}.")
            return self._vocabulary.index(cls)
        if not isinstance(cls, int) or not 0 <= cls < self._n_classes:
            raise ConfigError(f"classes_for_class_based_metrics: expected ids in [0, {self._n_classes}); got {cls!r}.")
        return cls

    @property
    def logits_dimension(self) -> int:
        return self._n_classes

    def _predictions(self, logits):
        return {P.LOGITS: logits, P.PROBABILITIES: tf.sigmoid(logits),
                P.CLASSES: _tiled(_class_names(self._n_classes, self._vocabulary), logits)}

    def _labels(self, labels, logits):
        head = "MultiLabelHead"
        if isinstance(labels, tf.SparseTensor):
            values = labels.values
            if values.dtype == tf.string:
                values = _class_ids(values, self._n_classes, self._vocabulary, head)
            else:
                values = _class_ids(values, self._n_classes, None, head)
            ids = tf.SparseTensor(labels.indices, values, labels.dense_shape)
            hot = tf.sparse.to_indicator(ids, self._n_classes)
            return tf.cast(hot, tf.int64)
        labels = _dense_labels(labels, head)
        if labels.shape.rank != 2 or (labels.shape[-1] is not None and labels.shape[-1] != self._n_classes):
            raise HeadError(f"{head}: expected multi-hot labels of shape [batch, {self._n_classes}] or a "
                            f"SparseTensor of class ids; got {labels.shape}.")
        labels = tf.cast(labels, tf.int64)
        check = tf.debugging.assert_less_equal(
            tf.reduce_max(tf.abs(labels * (labels - 1))), tf.constant(0, tf.int64),
            message=f"{head}: multi-hot labels must be 0 or 1")
        with tf.control_dependencies([check]):
            return tf.identity(labels)

    def _unweighted_loss(self, labels, logits):
        losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, logits.dtype), logits=logits)
        return tf.reduce_mean(losses, axis=-1, keepdims=True)

    def _metric_ops(self, labels, predictions, unweighted_loss, weights):
        weights = None if weights is None else weights * tf.ones_like(predictions[P.PROBABILITIES])
        probabilities = predictions[P.PROBABILITIES]
        metrics = {
            MetricKeys.AUC: _metrics.auc(labels, probabilities, weights=weights, name="auc"),
            MetricKeys.AUC_PR: _metrics.auc(labels, probabilities, weights=weights, curve="PR",
                                            summation_method="careful_interpolation", name="auc_pr"),
        }
        metrics.update(_at_thresholds(labels, probabilities, weights, self._thresholds))
        for k in self._class_metrics:
            w = None if weights is None else weights[:, k]
            metrics[f"{MetricKeys.AUC}/class{k}"] = _metrics.auc(labels[:, k], probabilities[:, k], weights=w)
            metrics[f"{MetricKeys.AUC_PR}/class{k}"] = _metrics.auc(
                labels[:, k], probabilities[:, k], weights=w, curve="PR", summation_method="careful_interpolation")
            metrics[f"{MetricKeys.PROBABILITY_MEAN}/class{k}"] = _metrics.mean(probabilities[:, k], weights=w)
        return metrics

    def _keras_metrics(self):
        return head_metrics.multi_label(self._thresholds, self._class_metrics)

    def _update_keras_metrics(self, metrics, labels, predictions, weights):
        probabilities = predictions[P.PROBABILITIES]
        weights = None if weights is None else weights * tf.ones_like(probabilities)
        head_metrics.update_multi_label(metrics, labels, probabilities, weights, self._thresholds,
                                        self._class_metrics)

    def export_outputs(self, predictions):
        classify = ClassificationOutput(scores=predictions[P.PROBABILITIES], classes=predictions[P.CLASSES])
        return {SignatureKeys.SERVING_DEFAULT: classify, SignatureKeys.CLASSIFY: classify,
                SignatureKeys.PREDICT: PredictOutput(predictions)}
