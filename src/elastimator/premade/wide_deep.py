"""DNNLinearCombinedClassifier / Regressor: wide (linear) & deep (DNN) models, each part with its own optimizer."""

from __future__ import annotations

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.premade.canned import CannedEstimator, Part, classification_head, regression_head
from elastimator.premade.dnn import (
    DEFAULT_LEARNING_RATE,
    DNN_SCOPE,
    activation_of,
    check_dropout,
    check_hidden_units,
    dnn_logits,
)
from elastimator.premade.features import check_columns, dense_input, linear_logits
from elastimator.premade.linear import LINEAR_SCOPE, default_linear_learning_rate


class WideAndDeep(CannedEstimator):
    """The combined model: logits = linear(linear columns) + dnn(dnn columns); either part may be absent."""

    _input_layer_partitioner = None
    """The v1 estimators' `input_layer_partitioner`, for both parts' input variables (as 2.15 applied it)."""

    def __init__(self, head, *, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
                 dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm, linear_sparse_combiner,
                 model_dir, config, warm_start_from):
        self._linear_columns = check_columns(linear_feature_columns, "linear_feature_columns", allow_empty=True)
        self._dnn_columns = check_columns(dnn_feature_columns, "dnn_feature_columns", allow_empty=True)
        if not self._linear_columns and not self._dnn_columns:
            raise ConfigError(f"{type(self).__name__}: give linear_feature_columns, dnn_feature_columns, or both; "
                              "got neither.")
        self._hidden_units = check_hidden_units(dnn_hidden_units) if self._dnn_columns else ()
        self._activation = activation_of(dnn_activation_fn)
        self._dropout = check_dropout(dnn_dropout)
        self._batch_norm = bool(batch_norm)
        self._sparse_combiner = linear_sparse_combiner
        parts = [Part(LINEAR_SCOPE, linear_optimizer, default_linear_learning_rate(self._linear_columns)),
                 Part(DNN_SCOPE, dnn_optimizer, DEFAULT_LEARNING_RATE)]
        super().__init__(head, parts, model_dir=model_dir, config=config, warm_start_from=warm_start_from)

    def _feature_columns(self):
        return self._linear_columns + self._dnn_columns

    def _logits(self, features, training):
        units = self.head.logits_dimension
        logits = []
        if self._dnn_columns:
            with tf.compat.v1.variable_scope(DNN_SCOPE):
                logits.append(self._deep_logits(features, units, training))
        if self._linear_columns:
            with tf.compat.v1.variable_scope(LINEAR_SCOPE, partitioner=self._input_layer_partitioner):
                logits.append(linear_logits(features, self._linear_columns, units, self._sparse_combiner))
        return tf.add_n(logits)

    def _deep_logits(self, features, units, training) -> tf.Tensor:
        with tf.compat.v1.variable_scope("input_from_feature_columns", partitioner=self._input_layer_partitioner):
            net = dense_input(features, self._dnn_columns)
        return dnn_logits(net, hidden_units=self._hidden_units, units=units, activation=self._activation,
                          dropout=self._dropout, batch_norm=self._batch_norm, training=training)


class DNNLinearCombinedClassifier(WideAndDeep):
    """Wide & deep classifier: a linear model over sparse crosses plus a DNN over embeddings.

    Args:
        model_dir, config, warm_start_from: As for `Estimator`.
        linear_feature_columns: Columns of the wide part (categorical, crossed, numeric).
        linear_optimizer: 'Ftrl' (default) or as `LinearClassifier`'s optimizer.
        dnn_feature_columns: Columns of the deep part (dense, indicator, embedding).
        dnn_optimizer: 'Adagrad' (default) or as `DNNClassifier`'s optimizer.
        dnn_hidden_units, dnn_activation_fn, dnn_dropout, batch_norm: As for `DNNClassifier`.
        n_classes, weight_column, label_vocabulary, loss_reduction: As for `DNNClassifier`.
        linear_sparse_combiner: As `LinearClassifier`'s sparse_combiner.
    """

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, n_classes: int = 2, weight_column=None,
                 label_vocabulary=None, config=None, warm_start_from=None, loss_reduction="sum_over_batch_size",
                 batch_norm: bool = False, linear_sparse_combiner: str = "sum"):
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, linear_feature_columns=linear_feature_columns, linear_optimizer=linear_optimizer,
                         dnn_feature_columns=dnn_feature_columns, dnn_optimizer=dnn_optimizer,
                         dnn_hidden_units=dnn_hidden_units, dnn_activation_fn=dnn_activation_fn,
                         dnn_dropout=dnn_dropout, batch_norm=batch_norm, linear_sparse_combiner=linear_sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNLinearCombinedRegressor(WideAndDeep):
    """Wide & deep regressor; arguments as `DNNLinearCombinedClassifier`, with `label_dimension`
    for the class arguments."""

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, label_dimension: int = 1, weight_column=None,
                 config=None, warm_start_from=None, loss_reduction="sum_over_batch_size", batch_norm: bool = False,
                 linear_sparse_combiner: str = "sum"):
        head = regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, linear_feature_columns=linear_feature_columns, linear_optimizer=linear_optimizer,
                         dnn_feature_columns=dnn_feature_columns, dnn_optimizer=dnn_optimizer,
                         dnn_hidden_units=dnn_hidden_units, dnn_activation_fn=dnn_activation_fn,
                         dnn_dropout=dnn_dropout, batch_norm=batch_norm, linear_sparse_combiner=linear_sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class DNNLinearCombinedEstimator(WideAndDeep):
    """Wide & deep for any head; other arguments as `DNNLinearCombinedClassifier`."""

    def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, config=None, batch_norm: bool = False,
                 linear_sparse_combiner: str = "sum", *, warm_start_from=None):
        super().__init__(head, linear_feature_columns=linear_feature_columns, linear_optimizer=linear_optimizer,
                         dnn_feature_columns=dnn_feature_columns, dnn_optimizer=dnn_optimizer,
                         dnn_hidden_units=dnn_hidden_units, dnn_activation_fn=dnn_activation_fn,
                         dnn_dropout=dnn_dropout, batch_norm=batch_norm, linear_sparse_combiner=linear_sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)
