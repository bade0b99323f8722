"""The names heads give their predictions and metrics, as tf.estimator named them.

Serving clients, TensorBoard dashboards and users' scripts look these keys up,
so they are kept character for character.
"""

from __future__ import annotations


class PredictionKeys:
    """Keys of the predictions dict a head returns."""

    CLASSES = "classes"
    CLASS_IDS = "class_ids"
    ALL_CLASSES = "all_classes"
    ALL_CLASS_IDS = "all_class_ids"
    LOGISTIC = "logistic"
    LOGITS = "logits"
    PREDICTIONS = "predictions"
    PROBABILITIES = "probabilities"


class MetricKeys:
    """Keys of the evaluation metrics a head computes."""

    LOSS = "loss"
    LOSS_MEAN = "average_loss"
    LOSS_REGULARIZATION = "regularization_loss"
    ACCURACY = "accuracy"
    ACCURACY_BASELINE = "accuracy_baseline"
    PRECISION = "precision"
    RECALL = "recall"
    AUC = "auc"
    AUC_PR = "auc_precision_recall"
    LABEL_MEAN = "label/mean"
    PREDICTION_MEAN = "prediction/mean"
    PROBABILITY_MEAN = "probability_mean"
    """A multi-label head's mean probability of one class, keyed `probability_mean/class<k>`."""


class SignatureKeys:
    """Keys of the serving signatures a head exports."""

    SERVING_DEFAULT = "serving_default"
    CLASSIFY = "classification"
    REGRESS = "regression"
    PREDICT = "predict"
