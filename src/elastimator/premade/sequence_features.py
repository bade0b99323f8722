"""Sequence feature columns into a [batch, time, width] tensor and its sequence lengths, in a graph.

tf.estimator 2.15 read sequence columns (`tf.feature_column.sequence_*`, and embedding columns over them)
through a Keras `SequenceFeatures` layer, which Keras 3 no longer has. The columns themselves still ship with
TensorFlow; this module asks them for their dense sequences directly, with variables made by
`tf.compat.v1.get_variable` under the same names 2.15's layers gave them (`sequence_features/<column>/...`,
`dense_features/<column>/...`), so checkpoints carry across.
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf
from tensorflow.python.feature_column import feature_column_v2 as fc  # the columns' state and transform API
from tensorflow.python.feature_column import sequence_feature_column as sfc

from elastimator.errors import ConfigError, InputFnError

SEQUENCE_SCOPE = "sequence_features"
CONTEXT_SCOPE = "dense_features"


class _GraphStateManager(fc.StateManager):
    """Makes and finds the columns' variables (embedding tables) with `get_variable`, one scope per column."""

    def __init__(self, scope: str):
        self._scope = scope
        self._variables: dict[tuple[str, str], tf.Variable] = {}

    def create_variable(self, feature_column, name, shape, dtype=None, trainable=True, use_resource=True,
                        initializer=None):
        with tf.compat.v1.variable_scope(self._scope), tf.compat.v1.variable_scope(feature_column.name):
            variable = tf.compat.v1.get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                                                 trainable=trainable, use_resource=use_resource)
        self._variables[(feature_column.name, name)] = variable
        return variable

    def get_variable(self, feature_column, name):
        return self._variables[(feature_column.name, name)]


def is_sequence_column(column) -> bool:
    """True for a sequence numeric column and for an embedding / indicator column over a sequence categorical
    one (embedding and indicator column classes serve both kinds, so the class alone does not tell)."""
    if isinstance(column, sfc.SequenceNumericColumn):
        return True
    return isinstance(getattr(column, "categorical_column", None), fc.SequenceCategoricalColumn)


def check_sequence_columns(columns, argument: str) -> tuple:
    """The columns as a tuple, each a sequence column (or an embedding / indicator column over one)."""
    columns = tuple(columns or ())
    if not columns:
        raise ConfigError(f"{argument}: needs at least one sequence feature column, e.g. "
                          "tf.feature_column.sequence_numeric_column('x').")
    for column in columns:
        if not (isinstance(column, fc.SequenceDenseColumn) and is_sequence_column(column)):
            raise ConfigError(
                f"{argument}: expected sequence columns (tf.feature_column.sequence_numeric_column, or an "
                f"embedding_column / indicator_column over a sequence_categorical_column_*); got {column!r}. "
                "Put per-example columns in context_feature_columns.")
    return columns


def check_context_columns(columns, argument: str) -> tuple:
    """The columns as a tuple of dense (non-sequence) columns."""
    columns = tuple(columns or ())
    for column in columns:
        if is_sequence_column(column) or not isinstance(column, fc.DenseColumn):
            raise ConfigError(
                f"{argument}: expected dense per-example columns (numeric_column, embedding_column, "
                f"indicator_column), not sequence columns; got {column!r}.")
    return columns


def _by_name(columns) -> list:
    return sorted(columns, key=lambda column: column.name)


def _states(columns, scope: str) -> _GraphStateManager:
    manager = _GraphStateManager(scope)
    for column in columns:
        column.create_state(manager)
    return manager


def sequence_input(features: Mapping, columns: tuple) -> tuple[tf.Tensor, tf.Tensor]:
    """([batch, time, width], [batch] lengths) from sequence columns, concatenated in name order.

    Every column must give each example the same length; a mismatch fails the step with the columns named.
    """
    cache = fc.FeatureTransformationCache(features)
    manager = _states(columns, SEQUENCE_SCOPE)
    inputs, lengths = [], []
    with tf.compat.v1.name_scope(SEQUENCE_SCOPE):
        for column in _by_name(columns):
            dense, length = column.get_sequence_dense_tensor(cache, manager)
            width = dense.shape[2:].num_elements() if dense.shape[2:].is_fully_defined() else -1
            inputs.append(tf.reshape(dense, [tf.shape(dense)[0], tf.shape(dense)[1], width]))
            lengths.append((column.name, tf.cast(length, tf.int64)))
        (first, first_length), others = lengths[0], lengths[1:]
        checks = [tf.debugging.assert_equal(first_length, length, message=(
            f"sequence feature columns {first} and {name} give an example different lengths (every sequence "
            "feature of an example must have the same number of steps)")) for name, length in others]
        with tf.control_dependencies(checks):
            return tf.concat(inputs, axis=-1), tf.identity(first_length)


def context_input(features: Mapping, columns: tuple) -> tf.Tensor:
    """[batch, width] from dense per-example columns, concatenated in name order."""
    cache = fc.FeatureTransformationCache(features)
    manager = _states(columns, CONTEXT_SCOPE)
    with tf.compat.v1.name_scope(CONTEXT_SCOPE):
        tensors = [column.get_dense_tensor(cache, manager) for column in _by_name(columns)]
        flat = [tf.reshape(t, [tf.shape(t)[0], t.shape[1:].num_elements()]) for t in tensors]
        return tf.concat(flat, axis=-1)


def with_context(sequence: tf.Tensor, context: tf.Tensor) -> tf.Tensor:
    """The context repeated at every step and appended to each step's input: [batch, time, width + context]."""
    steps = tf.shape(sequence)[1]
    tiled = tf.tile(tf.expand_dims(context, 1), tf.stack([1, steps, 1]))
    return tf.concat([sequence, tf.cast(tiled, sequence.dtype)], axis=-1)


def step_mask(features: Mapping, key: str, lengths: tf.Tensor, steps: tf.Tensor) -> tf.Tensor:
    """[batch, time] booleans, true at each example's real steps: features[key] if given, else from lengths."""
    if key in features:
        mask = features[key]
        if isinstance(mask, tf.SparseTensor):
            raise InputFnError(f"features[{key!r}] (the sequence mask) must be a dense [batch, time] tensor; got a "
                               "SparseTensor.")
        return tf.cast(mask, tf.bool)
    return tf.sequence_mask(lengths, maxlen=steps)
