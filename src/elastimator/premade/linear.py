"""LinearClassifier / LinearRegressor: a (generalized) linear model over feature columns."""

from __future__ import annotations

import math

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.premade.canned import CannedEstimator, Part, classification_head, regression_head, scope_path
from elastimator.premade.classification import BinaryClassHead
from elastimator.premade.features import check_columns, linear_logits
from elastimator.premade.regression import RegressionHead
from elastimator.premade.sdca import LinearSDCA

LINEAR_SCOPE = "linear"


def default_linear_learning_rate(columns) -> float:
    """tf.estimator's FTRL default: 0.2, smaller for models with many columns."""
    return min(0.2, 1.0 / math.sqrt(max(len(columns), 1)))


class _Linear(CannedEstimator):
    _partitioner = None
    """The v1 estimators' `partitioner`: splits the linear model's variables into parts, which a parameter-server
    job spreads over its servers."""

    def __init__(self, head, feature_columns, *, optimizer, sparse_combiner, model_dir, config, warm_start_from):
        self._columns = check_columns(feature_columns, "feature_columns")
        self._sparse_combiner = sparse_combiner
        self._sdca = optimizer if isinstance(optimizer, LinearSDCA) else None
        if self._sdca is None:
            parts = [Part(LINEAR_SCOPE, optimizer, default_linear_learning_rate(self._columns))]
        else:
            self._sdca_loss = _sdca_loss_type(head, sparse_combiner, type(self).__name__)
            parts = []  # SDCA's train op is its own (_train_op_fn)
        super().__init__(head, parts, model_dir=model_dir, config=config, warm_start_from=warm_start_from)

    def _feature_columns(self):
        return self._columns

    def _logits(self, features, training):
        with tf.compat.v1.variable_scope(LINEAR_SCOPE, partitioner=self._partitioner):
            return linear_logits(features, self._columns, self.head.logits_dimension, self._sparse_combiner)

    def _train_op_fn(self, features, labels):
        if self._sdca is None:
            return super()._train_op_fn(features, labels)
        if isinstance(labels, tf.Tensor) and labels.dtype == tf.string:
            raise ConfigError(f"{type(self).__name__} with LinearSDCA: labels must be numbers (0 or 1 for a "
                              "classifier); got strings. Map them to 0 / 1 in input_fn instead of label_vocabulary.")
        within = tf.compat.v1.get_variable_scope().name  # a framework may call model_fn inside scopes of its own
        variables = _LinearModelVariables(scope_path(within, LINEAR_SCOPE) + "/linear_model")

        def train_op_fn(loss):
            del loss  # SDCA solves for the batch's dual variables; it takes no gradient of the loss.
            return self._sdca.get_train_step(
                variables, self.head._weight_key, self._sdca_loss, self._columns,  # pylint: disable=protected-access
                features, labels, variables.bias, tf.compat.v1.train.get_global_step())
        return train_op_fn


class _LinearModelVariables:
    """The linear model's weights by column, as `LinearSDCA.get_train_step` asks for them."""

    def __init__(self, scope: str):
        self._scope = scope

    def _find(self, name: str) -> tf.Variable:
        found = [v for v in tf.compat.v1.global_variables() if v.op.name == f"{self._scope}/{name}"]
        if len(found) != 1:
            raise ConfigError(f"LinearSDCA: expected one variable {self._scope}/{name} (partitioned linear models "
                              f"are not trained by SDCA); found {len(found)}.")
        return found[0]

    def get_variable(self, column, name):
        return self._find(f"{column.name}/{name}")

    @property
    def bias(self) -> tf.Variable:
        return self._find("bias_weights")


def _sdca_loss_type(head, sparse_combiner: str, estimator: str) -> str:
    """SDCA's loss for the head (2.15's conditions: a binary classifier or a one-label regressor, 'sum')."""
    if sparse_combiner != "sum":
        raise ConfigError(f"{estimator} with LinearSDCA: sparse_combiner must be 'sum'; got {sparse_combiner!r}.")
    if isinstance(head, BinaryClassHead):
        return "logistic_loss"
    if type(head) is RegressionHead and head.logits_dimension == 1:  # pylint: disable=unidiomatic-typecheck
        return "squared_loss"
    raise ConfigError(f"{estimator} with LinearSDCA: SDCA trains binary classifiers (n_classes=2) and "
                      f"regressors of one label; got a {type(head).__name__} with {head.logits_dimension} logits. "
                      "Use another optimizer, such as 'Ftrl'.")


class LinearClassifier(_Linear):
    """A linear classifier (logistic regression for 2 classes, softmax above).

    Args:
        feature_columns: Any feature columns; categorical ones get one weight per bucket.
        model_dir, config, warm_start_from: As for `Estimator`.
        n_classes, weight_column, label_vocabulary, loss_reduction: As for `DNNClassifier`.
        optimizer: 'Ftrl' (default; learning rate min(0.2, 1/sqrt(#columns))), another name, or an optimizer.
        sparse_combiner: How a multivalent categorical feature's weights combine: 'sum' (default),
            'mean' or 'sqrtn'.

    Example:
        >>> education = tf.feature_column.categorical_column_with_hash_bucket("education", 100)
        >>> classifier = LinearClassifier([education, tf.feature_column.numeric_column("age")])
    """

    def __init__(self, feature_columns, model_dir=None, n_classes: int = 2, weight_column=None,
                 label_vocabulary=None, optimizer="Ftrl", config=None, warm_start_from=None,
                 loss_reduction="sum_over_batch_size", sparse_combiner: str = "sum"):
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        super().__init__(head, feature_columns, optimizer=optimizer, sparse_combiner=sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class LinearRegressor(_Linear):
    """A linear regressor; arguments as `LinearClassifier`, with `label_dimension` for the class arguments."""

    def __init__(self, feature_columns, model_dir=None, label_dimension: int = 1, weight_column=None,
                 optimizer="Ftrl", config=None, warm_start_from=None, loss_reduction="sum_over_batch_size",
                 sparse_combiner: str = "sum"):
        head = regression_head(label_dimension, weight_column, loss_reduction)
        super().__init__(head, feature_columns, optimizer=optimizer, sparse_combiner=sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)


class LinearEstimator(_Linear):
    """A linear model for any head (`BinaryClassHead`, `MultiClassHead`, `MultiLabelHead`, `RegressionHead`).

    Args:
        head: The head that turns logits into predictions, loss and metrics.
        feature_columns, model_dir, optimizer, config, sparse_combiner, warm_start_from: As for
            `LinearClassifier`.

    Example:
        >>> estimator = LinearEstimator(MultiLabelHead(n_classes=3), [tf.feature_column.numeric_column("x")])
    """

    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None,
                 sparse_combiner: str = "sum", warm_start_from=None):
        super().__init__(head, feature_columns, optimizer=optimizer, sparse_combiner=sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)
