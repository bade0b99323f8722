"""DNNClassifier / DNNRegressor: a feed-forward network over feature columns."""

from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.premade.canned import CannedEstimator, Part, classification_head, regression_head
from elastimator.premade.features import check_columns, dense_input

DNN_SCOPE = "dnn"
DEFAULT_LEARNING_RATE = 0.05


def activation_of(activation) -> Callable[[tf.Tensor], tf.Tensor]:
    """A callable activation, from itself or its name in `tf.nn` ("relu", "elu", "tanh", ...)."""
    if callable(activation):
        return activation
    function = getattr(tf.nn, activation, None) if isinstance(activation, str) else None
    if function is None:
        raise ConfigError(f"activation_fn: expected a callable or a tf.nn function name such as 'relu'; "
                          f"got {activation!r}.")
    return function


def check_hidden_units(hidden_units, argument: str = "hidden_units") -> tuple[int, ...]:
    """Layer widths as a tuple, after checking them (`argument` names them in the error)."""
    units = tuple(hidden_units) if isinstance(hidden_units, Sequence) and not isinstance(hidden_units, str) else None
    if not units or not all(isinstance(u, int) and u > 0 for u in units):
        raise ConfigError(f"{argument}: expected a non-empty list of positive ints, e.g. [64, 32]; got "
                          f"{hidden_units!r}.")
    return units


def check_dropout(dropout) -> float | None:
    if dropout is not None and not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
        raise ConfigError(f"dropout: expected a probability in [0, 1) or None; got {dropout!r}.")
    return dropout or None


def dnn_logits(net: tf.Tensor, *, hidden_units: Sequence[int], units: int, activation, dropout: float | None,
               batch_norm: bool, training: bool) -> tf.Tensor:
    """Hidden layers (dense, optional batch norm, activation, optional dropout) then a linear `logits` layer.

    Variables are named as tf.estimator named them (`hiddenlayer_0/kernel`, `logits/bias`)
    under the caller's variable scope.
    """
    # The v1 layer classes, which tf.compat.v1.layers.dense and friends build (those functions warn that they are
    # deprecated, from this file, about a call the user never made); `_scope` names the variables as they did.
    layers = tf.compat.v1.layers
    for index, width in enumerate(hidden_units):
        name = f"hiddenlayer_{index}"
        net = layers.Dense(width, activation=None if batch_norm else activation,
                           kernel_initializer=tf.compat.v1.glorot_uniform_initializer(), name=name, _scope=name)(net)
        if batch_norm:
            # Moving statistics update through UPDATE_OPS, which the head runs with each step.
            norm = f"{name}/batchnorm_{index}"
            net = activation(layers.BatchNormalization(momentum=0.999, name=norm, _scope=norm)(net, training=training))
        if dropout:
            net = layers.Dropout(rate=dropout)(net, training=training)
    return layers.Dense(units, kernel_initializer=tf.compat.v1.glorot_uniform_initializer(), name="logits",
                        _scope="logits")(net)


class _DNN(CannedEstimator):
    _input_layer_partitioner = None
    """The v1 estimators' `input_layer_partitioner`: splits the input layer's variables (embeddings) into parts,
    which a parameter-server job spreads over its servers."""

    def __init__(self, head, hidden_units, feature_columns, *, activation_fn, dropout, batch_norm, optimizer,
                 model_dir, config, warm_start_from):
        self._columns = check_columns(feature_columns, "feature_columns")
        self._hidden_units = check_hidden_units(hidden_units)
        self._activation = activation_of(activation_fn)
        self._dropout = check_dropout(dropout)
        self._batch_norm = bool(batch_norm)
        super().__init__(head, [Part(DNN_SCOPE, optimizer, DEFAULT_LEARNING_RATE)], model_dir=model_dir,
                         config=config, warm_start_from=warm_start_from)

    def _feature_columns(self):
        return self._columns

    def _logits(self, features, training):
        with tf.compat.v1.variable_scope(DNN_SCOPE):
            with tf.compat.v1.variable_scope("input_from_feature_columns",
                                             partitioner=self._input_layer_partitioner):
                net = dense_input(features, self._columns)
            return dnn_logits(net, hidden_units=self._hidden_units, units=self.head.logits_dimension,
                              activation=self._activation, dropout=self._dropout, batch_norm=self._batch_norm,
                              training=training)


class DNNClassifier(_DNN):
    """A feed-forward classifier over feature columns.

    Args:
        hidden_units: Widths of the hidden layers, e.g. `[64, 32]`.
        feature_columns: Dense, indicator or embedding columns (`tf.feature_column.*`).
        model_dir, config, warm_start_from: As for `Estimator`.
        n_classes: Number of classes (2: sigmoid head; more: softmax head).
        weight_column: Feature key of per-example weights.
        label_vocabulary: Class names, when labels are strings.
        optimizer: 'Adagrad' (default, learning rate 0.05), another name, or an optimizer.
        activation_fn: Hidden-layer activation (default `tf.nn.relu`).
        dropout: Probability of dropping a hidden unit while training.
        batch_norm: Batch-normalize each hidden layer.
        loss_reduction: See `Head`.

    Example:
        >>> columns = [tf.feature_column.numeric_column("x", shape=[4])]
        >>> classifier = DNNClassifier([16, 8], columns, n_classes=3, model_dir="/tmp/iris")
        >>> classifier.train(train_input_fn, max_steps=1000)
    """

    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes: int = 2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None, config=None,
                 warm_start_from=None, loss_reduction="sum_over_batch_size", batch_norm: bool = False):
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, hidden_units, feature_columns, activation_fn=activation_fn, dropout=dropout,
                         batch_norm=batch_norm, optimizer=optimizer, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNRegressor(_DNN):
    """A feed-forward regressor over feature columns; arguments as `DNNClassifier`, with
    `label_dimension` (targets per example) in place of the class arguments."""

    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension: int = 1, weight_column=None,
                 optimizer="Adagrad", activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None,
                 loss_reduction="sum_over_batch_size", batch_norm: bool = False):
        head = regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, hidden_units, feature_columns, activation_fn=activation_fn, dropout=dropout,
                         batch_norm=batch_norm, optimizer=optimizer, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNEstimator(_DNN):
    """A feed-forward network for any head; other arguments as `DNNClassifier`.

    Example:
        >>> estimator = DNNEstimator(RegressionHead(label_dimension=2), [32, 16], columns)
    """

    def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer="Adagrad",
                 activation_fn=tf.nn.relu, dropout=None, config=None, warm_start_from=None, batch_norm: bool = False):
        super().__init__(head, hidden_units, feature_columns, activation_fn=activation_fn, dropout=dropout,
                         batch_norm=batch_norm, optimizer=optimizer, model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)
