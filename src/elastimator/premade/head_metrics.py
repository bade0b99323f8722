"""The Keras metric objects a head's `metrics()` makes and its `update_metrics()` updates.

tf.estimator 2.15's heads offered these to custom model_fns: `metrics()` returns
a dict of metric objects keyed as the head's evaluation keys them, and
`update_metrics(eval_metrics, features, logits, labels)` updates them; the dict
then goes into `EstimatorSpec(eval_metric_ops=...)` (or is read eagerly). The
head's own evaluation (`create_estimator_spec` in EVAL) computes the same values
with `tf.compat.v1.metrics`. `tf.keras` is tf-keras here (elastimator selects
it), so these are Keras 2 metrics, as 2.15's were; it loads on first use.
"""

from __future__ import annotations

import functools
from typing import Iterable, Mapping

import tensorflow as tf

from elastimator.premade.keys import MetricKeys

K = MetricKeys


def _metrics():
    return tf.keras.metrics


def _name(key: str) -> str:
    return key.replace("/", "_")  # a metric's name becomes a name scope


def mean(key: str):
    return _metrics().Mean(name=_name(key))


def threshold_suffix(threshold: float) -> str:
    return f"/positive_threshold_{threshold:g}"


@functools.cache
def _baseline_accuracy() -> type:
    """A Mean of the labels whose result is the accuracy of always predicting the majority class (a class made
    on first use: its base is tf-keras's Mean, which loads tf-keras)."""

    class BaselineAccuracy(_metrics().Mean):
        def result(self):
            label_mean = super().result()
            return tf.maximum(label_mean, 1.0 - label_mean)

    return BaselineAccuracy


def binary(thresholds: Iterable[float]) -> dict:
    m = _metrics()
    metrics = {
        K.ACCURACY: m.Accuracy(name=K.ACCURACY), K.PRECISION: m.Precision(name=K.PRECISION),
        K.RECALL: m.Recall(name=K.RECALL), K.PREDICTION_MEAN: mean(K.PREDICTION_MEAN),
        K.LABEL_MEAN: mean(K.LABEL_MEAN), K.ACCURACY_BASELINE: _baseline_accuracy()(name=_name(K.ACCURACY_BASELINE)),
        K.AUC: m.AUC(name=K.AUC), K.AUC_PR: m.AUC(curve="PR", name=K.AUC_PR),
    }
    metrics.update(at_thresholds(thresholds))
    return metrics


def at_thresholds(thresholds: Iterable[float]) -> dict:
    m, metrics = _metrics(), {}
    for threshold in thresholds:
        suffix = threshold_suffix(threshold)
        metrics[K.ACCURACY + suffix] = m.BinaryAccuracy(threshold=threshold, name=_name(K.ACCURACY + suffix))
        metrics[K.PRECISION + suffix] = m.Precision(thresholds=threshold, name=_name(K.PRECISION + suffix))
        metrics[K.RECALL + suffix] = m.Recall(thresholds=threshold, name=_name(K.RECALL + suffix))
    return metrics


def update_binary(metrics: Mapping, labels, class_ids, logistic, weights, thresholds: Iterable[float]) -> None:
    labels_f = tf.cast(labels, tf.float32)
    metrics[K.ACCURACY].update_state(labels, class_ids, sample_weight=weights)
    metrics[K.PRECISION].update_state(labels, class_ids, sample_weight=weights)
    metrics[K.RECALL].update_state(labels, class_ids, sample_weight=weights)
    metrics[K.PREDICTION_MEAN].update_state(logistic, sample_weight=weights)
    metrics[K.LABEL_MEAN].update_state(labels_f, sample_weight=weights)
    metrics[K.ACCURACY_BASELINE].update_state(labels_f, sample_weight=weights)
    metrics[K.AUC].update_state(labels, logistic, sample_weight=weights)
    metrics[K.AUC_PR].update_state(labels, logistic, sample_weight=weights)
    update_at_thresholds(metrics, labels, logistic, weights, thresholds)


def update_at_thresholds(metrics: Mapping, labels, probabilities, weights, thresholds: Iterable[float]) -> None:
    for threshold in thresholds:
        suffix = threshold_suffix(threshold)
        for key in (K.ACCURACY, K.PRECISION, K.RECALL):
            metrics[key + suffix].update_state(labels, probabilities, sample_weight=weights)


def multi_label(thresholds: Iterable[float], classes: Iterable[int]) -> dict:
    m = _metrics()
    metrics = {K.AUC: m.AUC(name=K.AUC), K.AUC_PR: m.AUC(curve="PR", name=K.AUC_PR)}
    metrics.update(at_thresholds(thresholds))
    for k in classes:
        metrics[f"{K.AUC}/class{k}"] = m.AUC(name=f"auc_class{k}")
        metrics[f"{K.AUC_PR}/class{k}"] = m.AUC(curve="PR", name=f"auc_pr_class{k}")
        metrics[f"{K.PROBABILITY_MEAN}/class{k}"] = mean(f"{K.PROBABILITY_MEAN}/class{k}")
    return metrics


def update_multi_label(metrics: Mapping, labels, probabilities, weights, thresholds: Iterable[float],
                       classes: Iterable[int]) -> None:
    metrics[K.AUC].update_state(labels, probabilities, sample_weight=weights)
    metrics[K.AUC_PR].update_state(labels, probabilities, sample_weight=weights)
    update_at_thresholds(metrics, labels, probabilities, weights, thresholds)
    for k in classes:
        weight = None if weights is None else weights[:, k]
        metrics[f"{K.AUC}/class{k}"].update_state(labels[:, k], probabilities[:, k], sample_weight=weight)
        metrics[f"{K.AUC_PR}/class{k}"].update_state(labels[:, k], probabilities[:, k], sample_weight=weight)
        metrics[f"{K.PROBABILITY_MEAN}/class{k}"].update_state(probabilities[:, k], sample_weight=weight)
