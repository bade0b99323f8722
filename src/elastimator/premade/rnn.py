"""RNNEstimator / RNNClassifier (tf.estimator.experimental): a recurrent network over sequence feature columns.

The model, as tf.estimator 2.15 built it: the sequence columns' dense steps (context columns repeated at every
step and appended), a Keras RNN over the real steps of each example (masked by its length), and a dense
`logits` layer on the last real step's output, or on every step's with `return_sequences`. The cells are
tf-keras' (`SimpleRNNCell`, `LSTMCell`, `GRUCell`, or what `rnn_cell_fn` returns), built in the estimator's
graph; variables are named as 2.15 named them (`rnn_model/rnn/lstm_cell/kernel`, `rnn_model/logits/bias`).
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from elastimator._keras_routing import tf_keras
from elastimator.errors import ConfigError
from elastimator.premade.canned import CannedEstimator, Part, classification_head
from elastimator.premade.dnn import check_hidden_units
from elastimator.premade.sequence_features import (
    check_context_columns,
    check_sequence_columns,
    context_input,
    sequence_input,
    step_mask,
    with_context,
)
from elastimator.premade.sequential_head import SequentialHead

MODEL_SCOPE = "rnn_model"
DEFAULT_LEARNING_RATE = 0.05
CELL_TYPES = {"simple_rnn": "SimpleRNNCell", "lstm": "LSTMCell", "gru": "GRUCell"}
"""The `cell_type` names, each with the tf-keras layer it makes."""


class _UseDefault:
    """`cell_type`'s default: 'simple_rnn' unless an `rnn_cell_fn` is given."""

    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT = _UseDefault()


def rnn_cell_fn_of(units, cell_type, rnn_cell_fn) -> Callable[[], object]:
    """A function making the RNN's cell, from `rnn_cell_fn` or from `units` and `cell_type` (2.15's rules)."""
    if rnn_cell_fn is not None:
        if units is not None or cell_type is not USE_DEFAULT:
            raise ConfigError("RNN estimators: pass either rnn_cell_fn, or units and cell_type, not both; got "
                              f"rnn_cell_fn with units={units!r}, cell_type={cell_type!r}.")
        if not callable(rnn_cell_fn):
            raise ConfigError(f"rnn_cell_fn: expected a function returning an RNN cell; got {rnn_cell_fn!r}.")
        return rnn_cell_fn
    if units is None:
        raise ConfigError("RNN estimators: pass units (hidden units per RNN layer, e.g. [32, 16]) or an "
                          "rnn_cell_fn.")
    units = check_hidden_units(units, "units")
    name = "simple_rnn" if cell_type is USE_DEFAULT else cell_type
    cell_class = getattr(tf_keras().layers, CELL_TYPES[name]) if isinstance(name, str) and name in CELL_TYPES \
        else cell_type
    if not callable(cell_class):
        raise ConfigError(f"cell_type: expected one of {sorted(CELL_TYPES)} or a cell class; got {cell_type!r}.")

    def make_cell():
        cells = [cell_class(width) for width in units]
        return cells[0] if len(cells) == 1 else tf_keras().layers.StackedRNNCells(cells)
    return make_cell


class RNNEstimator(CannedEstimator):
    """A recurrent network over sequence feature columns, for any head.

    Args:
        head: The head that turns logits into predictions, loss and metrics. With `return_sequences`, a head of
            one task, applied at every real step.
        sequence_feature_columns: Sequence columns (`tf.feature_column.sequence_numeric_column`, or an
            embedding / indicator column over a `sequence_categorical_column_*`); their features are
            SparseTensors of variable-length sequences.
        context_feature_columns: Dense per-example columns, repeated at every step.
        units: Hidden units per RNN layer, e.g. `[32, 16]` (stacked cells); with `cell_type`.
        cell_type: 'simple_rnn' (the default), 'lstm', 'gru', or a cell class taking the units.
        rnn_cell_fn: Instead of `units` / `cell_type`: a function returning the cell (for stacked cells, a
            `tf.keras.layers.StackedRNNCells`).
        return_sequences: Logits at every step (labels [batch, time]) instead of at the last real step.
        model_dir, config: As for `Estimator`.
        optimizer: 'Adagrad' (default, learning rate 0.05), another name, or an optimizer.

    Example:
        >>> tokens = tf.feature_column.sequence_categorical_column_with_identity("tokens", 1000)
        >>> estimator = RNNEstimator(RegressionHead(), [tf.feature_column.embedding_column(tokens, 16)],
        ...                          units=[32], cell_type="lstm")
    """

    _mask_key = "sequence_mask"

    def __init__(self, head, sequence_feature_columns, context_feature_columns=None, units=None,
                 cell_type=USE_DEFAULT, rnn_cell_fn=None, return_sequences=False, model_dir=None,
                 optimizer="Adagrad", config=None):
        self._sequence_columns = check_sequence_columns(sequence_feature_columns, "sequence_feature_columns")
        self._context_columns = check_context_columns(context_feature_columns, "context_feature_columns")
        self._cell_fn = rnn_cell_fn_of(units, cell_type, rnn_cell_fn)
        self._return_sequences = bool(return_sequences)
        if self._return_sequences:
            head = SequentialHead(head, self._mask_key)
        super().__init__(head, [Part(None, optimizer, DEFAULT_LEARNING_RATE)], model_dir=model_dir, config=config)

    def _feature_columns(self):
        return self._sequence_columns + self._context_columns

    def _logits(self, features, training):
        steps, lengths = sequence_input(features, self._sequence_columns)
        if self._context_columns:
            steps = with_context(steps, context_input(features, self._context_columns))
        # The head reads the mask from the features (a padding step counts in no loss or metric).
        features[self._mask_key] = mask = step_mask(features, self._mask_key, lengths, tf.shape(steps)[1])
        return self._rnn_logits(steps, mask, training)

    def _rnn_logits(self, steps: tf.Tensor, mask: tf.Tensor, training: bool) -> tf.Tensor:
        with tf.compat.v1.variable_scope(MODEL_SCOPE):
            rnn = tf_keras().layers.RNN(self._cell_fn(), return_sequences=self._return_sequences, name="rnn")
            outputs = rnn(steps, mask=mask, training=training)
            return tf_keras().layers.Dense(self.head.logits_dimension, name="logits")(outputs)


class RNNClassifier(RNNEstimator):
    """A recurrent classifier over sequence feature columns: binary (sigmoid) for 2 classes, softmax above.

    Args:
        sequence_feature_columns, context_feature_columns, units, cell_type, rnn_cell_fn, return_sequences,
        model_dir, optimizer, config: As for `RNNEstimator`.
        n_classes, weight_column, label_vocabulary, loss_reduction: As for `DNNClassifier` (with
            `return_sequences`, a `weight_column` is a feature key of [batch, time] weights).
        sequence_mask: The feature key of the [batch, time] mask of real steps: read from the features when
            there, else made from the sequences' lengths; with `return_sequences` it is also a prediction.

    Example:
        >>> tokens = tf.feature_column.sequence_categorical_column_with_hash_bucket("tokens", 1000)
        >>> classifier = RNNClassifier([tf.feature_column.embedding_column(tokens, 16)], units=[32, 16],
        ...                            cell_type="lstm")
    """

    def __init__(self, sequence_feature_columns, context_feature_columns=None, units=None, cell_type=USE_DEFAULT,
                 rnn_cell_fn=None, return_sequences=False, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", loss_reduction="sum_over_batch_size",
                 sequence_mask="sequence_mask", config=None):
        if return_sequences and weight_column is not None and not isinstance(weight_column, str):
            raise ConfigError(f"RNNClassifier: with return_sequences, weight_column must be a feature key (a "
                              f"string) of [batch, time] weights; got {weight_column!r}.")
        self._mask_key = sequence_mask
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, sequence_feature_columns, context_feature_columns, units=units, cell_type=cell_type,
                         rnn_cell_fn=rnn_cell_fn, return_sequences=return_sequences, model_dir=model_dir,
                         optimizer=optimizer, config=config)
