"""What a SavedModel signature returns: predict, classification, regression.

A `model_fn` puts these in `EstimatorSpec.export_outputs`; the exporter turns
each into a `SignatureDef` over the serving receiver's input tensors.
"""

from __future__ import annotations

import abc
from typing import Mapping

import tensorflow as tf

from elastimator.errors import ExportError

_sig = tf.compat.v1.saved_model.signature_constants
_build_info = tf.compat.v1.saved_model.utils.build_tensor_info


def _is_tensor(value) -> bool:
    return isinstance(value, (tf.Tensor, tf.SparseTensor, tf.RaggedTensor))


class ExportOutput(abc.ABC):
    """Base of the outputs a signature can return."""

    @abc.abstractmethod
    def as_signature_def(self, receiver_tensors: Mapping[str, tf.Tensor]) -> tf.compat.v1.MetaGraphDef:
        """Returns the `SignatureDef` of this output over `receiver_tensors`."""

    @property
    @abc.abstractmethod
    def outputs(self) -> dict[str, tf.Tensor]:
        """The named output tensors."""

    def _predict_signature(self, receiver_tensors: Mapping[str, tf.Tensor]):
        return tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            inputs={k: _build_info(v) for k, v in receiver_tensors.items()},
            outputs={k: _build_info(v) for k, v in self.outputs.items()},
            method_name=_sig.PREDICT_METHOD_NAME,
        )


def _single_string_input(receiver_tensors: Mapping[str, tf.Tensor]) -> tf.Tensor | None:
    """The serialized-Example input that classify/regress signatures need, if that is what we have."""
    if len(receiver_tensors) != 1:
        return None
    (tensor,) = receiver_tensors.values()
    return tensor if isinstance(tensor, tf.Tensor) and tensor.dtype == tf.string else None


_SINGLE_OUTPUT = "output"
"""The name a PredictOutput of one tensor gives it, as tf.estimator 2.15 named it."""


class PredictOutput(ExportOutput):
    """Any tensors, served by TF Serving's Predict API.

    Args:
        outputs: A tensor (served as "output") or a dict of string keys to tensors.
    """

    def __init__(self, outputs):
        if _is_tensor(outputs):
            outputs = {_SINGLE_OUTPUT: outputs}
        if not isinstance(outputs, Mapping) or not outputs:
            raise ExportError(f"PredictOutput expects a tensor or a non-empty dict of tensors; got {outputs!r}.")
        for key, value in outputs.items():
            if not isinstance(key, str) or not _is_tensor(value):
                raise ExportError(
                    f"PredictOutput outputs must map str keys to tensors; got {key!r}: {type(value).__name__}."
                )
        self._outputs = dict(outputs)

    @property
    def outputs(self) -> dict[str, tf.Tensor]:
        return dict(self._outputs)

    def as_signature_def(self, receiver_tensors):
        return self._predict_signature(receiver_tensors)


class ClassificationOutput(ExportOutput):
    """Class scores and/or class names, served by TF Serving's Classify API.

    Args:
        scores: float tensor [batch, num_classes], or None.
        classes: string tensor [batch, num_classes], or None. At least one is needed.

    When the serving input is not one serialized `tf.Example` string tensor (the
    Classify API's contract), the signature is written as a predict signature
    with the same outputs, so it stays callable.
    """

    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ExportError("ClassificationOutput needs scores, classes, or both; got neither.")
        if scores is not None and not (isinstance(scores, tf.Tensor) and scores.dtype.is_floating):
            raise ExportError(f"ClassificationOutput scores must be a float tensor; got {scores!r}.")
        if classes is not None and not (isinstance(classes, tf.Tensor) and classes.dtype == tf.string):
            raise ExportError(
                f"ClassificationOutput classes must be a string tensor; got {classes!r}. "
                "Convert class ids with tf.strings.as_string."
            )
        self._scores, self._classes = scores, classes

    @property
    def scores(self) -> tf.Tensor | None:
        return self._scores

    @property
    def classes(self) -> tf.Tensor | None:
        return self._classes

    @property
    def outputs(self) -> dict[str, tf.Tensor]:
        named = {_sig.CLASSIFY_OUTPUT_SCORES: self.scores, _sig.CLASSIFY_OUTPUT_CLASSES: self.classes}
        return {k: v for k, v in named.items() if v is not None}

    def as_signature_def(self, receiver_tensors):
        examples = _single_string_input(receiver_tensors)
        if examples is None:
            return self._predict_signature(receiver_tensors)
        return tf.compat.v1.saved_model.signature_def_utils.classification_signature_def(
            examples, self.classes, self.scores
        )


class RegressionOutput(ExportOutput):
    """One float value per example, served by TF Serving's Regress API.

    Args:
        value: float tensor [batch] or [batch, 1].
    """

    def __init__(self, value):
        if not (isinstance(value, tf.Tensor) and value.dtype.is_floating):
            raise ExportError(f"RegressionOutput value must be a float tensor; got {value!r}.")
        self._value = value

    @property
    def value(self) -> tf.Tensor:
        return self._value

    @property
    def outputs(self) -> dict[str, tf.Tensor]:
        return {_sig.REGRESS_OUTPUTS: self.value}

    def as_signature_def(self, receiver_tensors):
        examples = _single_string_input(receiver_tensors)
        if examples is None:
            return self._predict_signature(receiver_tensors)
        return tf.compat.v1.saved_model.signature_def_utils.regression_signature_def(examples, self.value)


class _SupervisedOutput(ExportOutput):
    """Loss, predictions and metrics of a TRAIN or EVAL graph export, named `loss`, `predictions/<key>` and
    `metrics/<name>/value` / `metrics/<name>/update_op` in its signature."""

    method_name = ""
    LOSS_NAME = "loss"
    PREDICTIONS_NAME = "predictions"
    METRICS_NAME = "metrics"
    METRIC_VALUE_SUFFIX = "value"
    METRIC_UPDATE_SUFFIX = "update_op"

    def __init__(self, loss=None, predictions=None, metrics=None):
        self._outputs: dict[str, tf.Tensor] = {}
        if loss is not None:
            self._outputs[self.LOSS_NAME] = loss
        if predictions is not None:
            items = predictions.items() if isinstance(predictions, Mapping) else [(None, predictions)]
            for key, tensor in items:
                self._outputs[self.PREDICTIONS_NAME if key is None else f"{self.PREDICTIONS_NAME}/{key}"] = tensor
        for name, (value, update) in (metrics or {}).items():
            self._outputs[f"{self.METRICS_NAME}/{name}/{self.METRIC_VALUE_SUFFIX}"] = value
            update_tensor = update if isinstance(update, tf.Tensor) else tf.constant(0, name="update_done")
            if isinstance(update, tf.Operation):
                with tf.control_dependencies([update]):
                    update_tensor = tf.constant(True, name=f"{name.replace('/', '_')}_updated")
            self._outputs[f"{self.METRICS_NAME}/{name}/{self.METRIC_UPDATE_SUFFIX}"] = update_tensor

    def _named(self, prefix: str) -> dict[str, tf.Tensor] | None:
        named = {k: v for k, v in self._outputs.items() if k == prefix or k.startswith(prefix + "/")}
        return named or None

    @property
    def loss(self) -> dict[str, tf.Tensor] | None:
        """{"loss": tensor} as in the signature, or None."""
        return self._named(self.LOSS_NAME)

    @property
    def predictions(self) -> dict[str, tf.Tensor] | None:
        """The predictions by signature name (`predictions/<key>`, or `predictions` for one tensor), or None."""
        return self._named(self.PREDICTIONS_NAME)

    @property
    def metrics(self) -> dict[str, tf.Tensor] | None:
        """`metrics/<name>/value` and `metrics/<name>/update_op` tensors, or None."""
        return self._named(self.METRICS_NAME)

    @property
    def outputs(self):
        return dict(self._outputs)

    def as_signature_def(self, receiver_tensors):
        return tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
            inputs={k: _build_info(v) for k, v in receiver_tensors.items()},
            outputs={k: _build_info(v) for k, v in self._outputs.items()},
            method_name=self.method_name,
        )


class TrainOutput(_SupervisedOutput):
    """Signature of an exported TRAIN graph (experimental_mode=TRAIN)."""

    method_name = "tensorflow/supervised/training"


class EvalOutput(_SupervisedOutput):
    """Signature of an exported EVAL graph (experimental_mode=EVAL)."""

    method_name = "tensorflow/supervised/eval"
