"""Serving input receivers: what a SavedModel takes, and the features it makes of it."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from elastimator._records import record_type
from elastimator.errors import ExportError

_TENSOR_TYPES = (tf.Tensor, tf.SparseTensor, tf.RaggedTensor)
SINGLE_FEATURE_KEY = "feature"
SINGLE_RECEIVER_KEY = "input"
SINGLE_LABEL_KEY = "label"


def _as_tensor_dict(value, what: str, single_key: str) -> dict[str, Any]:
    if isinstance(value, _TENSOR_TYPES):
        return {single_key: value}
    if not isinstance(value, Mapping):
        raise ExportError(f"{what} must be a tensor or a dict of tensors; got {value!r}.")
    for key, tensor in value.items():
        if not isinstance(key, str):
            raise ExportError(f"{what} keys must be strings; got {key!r}.")
        if not isinstance(tensor, _TENSOR_TYPES):
            raise ExportError(f"{what}[{key!r}] must be a tensor; got {type(tensor).__name__}.")
    return dict(value)


def _alternatives(value) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ExportError(f"receiver_tensors_alternatives must be a dict of name -> tensors; got {value!r}.")
    return {
        name: _as_tensor_dict(tensors, f"receiver_tensors_alternatives[{name!r}]", SINGLE_RECEIVER_KEY)
        for name, tensors in value.items()
    }


_RECEIVER_FIELDS = ("features", "receiver_tensors", "receiver_tensors_alternatives")


class ServingInputReceiver(record_type("ServingInputReceiver", _RECEIVER_FIELDS)):
    """Serving inputs (`receiver_tensors`) and the `features` the model_fn gets from them.

    Args:
        features: A tensor or dict of tensors passed to model_fn (a single tensor
            becomes {"feature": tensor}).
        receiver_tensors: The placeholders the SavedModel takes (a single tensor
            becomes {"input": tensor}).
        receiver_tensors_alternatives: Optional extra input sets, each exported
            as extra signatures "<output key>:<alternative name>".
    """

    __slots__ = ()
    labels = None

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        return super().__new__(
            cls, _as_tensor_dict(features, f"{cls.__name__} features", SINGLE_FEATURE_KEY),
            _as_tensor_dict(receiver_tensors, f"{cls.__name__} receiver_tensors", SINGLE_RECEIVER_KEY),
            _alternatives(receiver_tensors_alternatives))


class TensorServingInputReceiver(record_type("TensorServingInputReceiver", _RECEIVER_FIELDS)):
    """Like `ServingInputReceiver`, but model_fn gets `features` as one raw tensor, not a dict."""

    __slots__ = ()
    labels = None

    def __new__(cls, features, receiver_tensors, receiver_tensors_alternatives=None):
        if not isinstance(features, _TENSOR_TYPES):
            raise ExportError(f"TensorServingInputReceiver features must be a single tensor; got {features!r}.")
        receiver = ServingInputReceiver(features, receiver_tensors, receiver_tensors_alternatives)
        return super().__new__(cls, features, receiver.receiver_tensors, receiver.receiver_tensors_alternatives)


SERVING_RECEIVERS = (ServingInputReceiver, TensorServingInputReceiver)
"""What a serving_input_receiver_fn may return (two unrelated namedtuples, as in tf.estimator 2.15)."""


class SupervisedInputReceiver:
    """Features, labels and the input placeholders of an exported TRAIN or EVAL graph."""

    def __init__(self, features, labels, receiver_tensors):
        self.features = _as_tensor_dict(features, "SupervisedInputReceiver features", SINGLE_FEATURE_KEY)
        self.labels = labels if isinstance(labels, _TENSOR_TYPES) else _as_tensor_dict(
            labels, "SupervisedInputReceiver labels", SINGLE_LABEL_KEY)
        self.receiver_tensors = _as_tensor_dict(
            receiver_tensors, "SupervisedInputReceiver receiver_tensors", SINGLE_RECEIVER_KEY)
        self.receiver_tensors_alternatives: dict = {}


def build_parsing_serving_input_receiver_fn(
    feature_spec: Mapping[str, Any], default_batch_size: int | None = None
) -> Callable[[], ServingInputReceiver]:
    """A receiver fn that takes serialized `tf.train.Example`s and parses them with `feature_spec`.

    Example:
        >>> spec = {"x": tf.io.FixedLenFeature([4], tf.float32)}
        >>> fn = build_parsing_serving_input_receiver_fn(spec)
    """
    if not isinstance(feature_spec, Mapping) or not feature_spec:
        raise ExportError(f"feature_spec must be a non-empty dict of name -> tf.io feature; got {feature_spec!r}.")

    def serving_input_receiver_fn() -> ServingInputReceiver:
        serialized = tf.compat.v1.placeholder(tf.string, [default_batch_size], name="input_example_tensor")
        features = tf.io.parse_example(serialized, dict(feature_spec))
        return ServingInputReceiver(features, {"examples": serialized})

    return serving_input_receiver_fn


def _dtype_and_shape(value) -> tuple[tf.DType, tf.TensorShape]:
    """dtype and shape of a tensor, TensorSpec or array, without adding it to the graph."""
    if isinstance(value, (tf.Tensor, tf.TensorSpec)):
        return value.dtype, value.shape
    array = np.asarray(value)
    dtype = tf.string if array.dtype.kind in "USO" else tf.as_dtype(array.dtype)
    return dtype, tf.TensorShape(array.shape)


def _placeholders(tensors, default_batch_size, what: str) -> Any:
    def one(name, value):
        dtype, shape = _dtype_and_shape(value)
        batch = tf.TensorShape([default_batch_size])
        return tf.compat.v1.placeholder(dtype, batch.concatenate(shape[1:]) if shape.rank else batch, name=name)

    if isinstance(tensors, Mapping):
        if not tensors:
            raise ExportError(f"{what} must not be empty.")
        return {name: one(name, t) for name, t in tensors.items()}
    return one(what, tensors)


def build_raw_serving_input_receiver_fn(
    features, default_batch_size: int | None = None
) -> Callable[[], ServingInputReceiver]:
    """A receiver fn that takes the features as they are: one placeholder per feature.

    Args:
        features: A dict of name -> tensor/TensorSpec/array giving each feature's
            dtype and per-example shape (its first dimension is the batch), or one tensor.
        default_batch_size: The placeholders' batch dimension (None: any).
    """
    def serving_input_receiver_fn() -> ServingInputReceiver:
        placeholders = _placeholders(features, default_batch_size, "input")
        if isinstance(placeholders, dict):
            return ServingInputReceiver(placeholders, placeholders)
        return TensorServingInputReceiver(placeholders, {SINGLE_RECEIVER_KEY: placeholders})

    return serving_input_receiver_fn


def build_raw_supervised_input_receiver_fn(
    features, labels, default_batch_size: int | None = None
) -> Callable[[], SupervisedInputReceiver]:
    """A receiver fn for exporting TRAIN/EVAL graphs: placeholders for features and labels."""
    def supervised_input_receiver_fn() -> SupervisedInputReceiver:
        feature_ph = _placeholders(features, default_batch_size, "input")
        label_ph = _placeholders(labels, default_batch_size, "label")
        receivers = dict(feature_ph) if isinstance(feature_ph, dict) else {SINGLE_RECEIVER_KEY: feature_ph}
        receivers.update(label_ph if isinstance(label_ph, dict) else {SINGLE_LABEL_KEY: label_ph})
        return SupervisedInputReceiver(feature_ph, label_ph, receivers)

    return supervised_input_receiver_fn
