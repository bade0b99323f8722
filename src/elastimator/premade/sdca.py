"""`LinearSDCA`: Stochastic Dual Coordinate Ascent for `LinearClassifier` (binary) and `LinearRegressor`.

SDCA needs no learning rate: each step solves, example by example, for the dual variables of the batch and
moves the weights by the result. TensorFlow still ships the solver's kernel (`SdcaOptimizerV2`); this module
feeds it as tf.estimator 2.15 did:

* each categorical column (bucketized and crossed ones too) is a sparse feature group: the examples' ids into
  its weights, with the ids' weights as values; each dense column a dense group; the bias a dense group of ones;
* the solver works on unshrunk copies of the weights (`<weights>_unshrunk`); the model's own weights are the
  L1-shrunk copies, `sign(u) * max(|u| - l1 / l2, 0)`, assigned after every step;
* each example's dual state (4 floats) is kept between steps in a hash table keyed by its id and saved with
  the checkpoint, so a step on an example seen before continues from where it was (2.15 keyed its own table by
  a fingerprint of the id).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import tensorflow as tf
from tensorflow.python.feature_column import feature_column_v2 as fc  # the columns' transform API
from tensorflow.python.ops import gen_sdca_ops  # TensorFlow's SDCA kernels

from elastimator.errors import ConfigError, InputFnError

LOSS_TYPES = ("logistic_loss", "squared_loss", "hinge_loss", "smooth_hinge_loss", "poisson_loss")
STATE_TABLE = "sdca_example_state"
_STATE_WIDTH = 4  # the solver's per-example state: dual, primal loss, dual loss, example weight


class LinearSDCA:
    """SDCA as the `optimizer` of `LinearClassifier` (binary) or `LinearRegressor` (one label).

    Args:
        example_id_column: The feature with each example's id (a string [batch] tensor): the solver keeps a
            state per example.
        num_loss_partitions: Number of processes training concurrently (the solver's sigma'); 1 on one machine.
        num_table_shards: Kept for tf.estimator's signature: the example-state table is one table here.
        symmetric_l1_regularization: L1 strength, >= 0.
        symmetric_l2_regularization: L2 strength, > 0 (typically >= 1).
        adaptive: Sample the batch's examples adaptively (by their duality gap) instead of uniformly.

    Example:
        >>> sdca = LinearSDCA(example_id_column="example_id", symmetric_l2_regularization=2.0)
        >>> classifier = LinearClassifier(columns, weight_column="weight", optimizer=sdca)
    """

    def __init__(self, example_id_column, num_loss_partitions=1, num_table_shards=None,
                 symmetric_l1_regularization=0.0, symmetric_l2_regularization=1.0, adaptive=False):
        if not isinstance(example_id_column, str) or not example_id_column:
            raise ConfigError(f"LinearSDCA: example_id_column must be a feature name; got {example_id_column!r}.")
        if not isinstance(num_loss_partitions, int) or num_loss_partitions < 1:
            raise ConfigError(f"LinearSDCA: num_loss_partitions must be an int >= 1; got {num_loss_partitions!r}.")
        if symmetric_l1_regularization < 0:
            raise ConfigError("LinearSDCA: symmetric_l1_regularization must be >= 0; got "
                              f"{symmetric_l1_regularization!r}.")
        if symmetric_l2_regularization <= 0:
            raise ConfigError("LinearSDCA: symmetric_l2_regularization must be > 0 (SDCA needs a strongly convex "
                              f"objective); got {symmetric_l2_regularization!r}.")
        self._example_id_column = example_id_column
        self._num_loss_partitions = num_loss_partitions
        self._num_table_shards = num_table_shards
        self._l1 = float(symmetric_l1_regularization)
        self._l2 = float(symmetric_l2_regularization)
        self._adaptive = bool(adaptive)

    @property
    def example_id_column(self) -> str:
        return self._example_id_column

    def get_train_step(self, state_manager, weight_column_name, loss_type, feature_columns, features, targets,
                       bias_var, global_step):
        """The train op of one SDCA step over this batch, counting `global_step`.

        Args:
            state_manager: Finds each column's weights: `get_variable(column, "weights")`.
            weight_column_name: The feature of per-example weights, or None.
            loss_type: One of `LOSS_TYPES` ('logistic_loss' for binary labels in {0, 1}, 'squared_loss', ...).
            feature_columns: The linear model's columns.
            features: The batch's features (with `example_id_column`).
            targets: The batch's labels, one per example.
            bias_var: The model's bias variable.
            global_step: The global step variable.
        """
        if loss_type not in LOSS_TYPES:
            raise ConfigError(f"LinearSDCA: loss_type must be one of {LOSS_TYPES}; got {loss_type!r}.")
        cache = fc.FeatureTransformationCache(features)  # one per batch: columns sharing an input transform it once
        groups = [_group_of(column, cache, state_manager.get_variable(column, "weights"))
                  for column in feature_columns]
        ones = tf.ones([tf.shape(targets)[0], 1])
        groups.append(_Group(bias_var, dense=ones))
        sparse = [g for g in groups if g.dense is None]
        dense = [g for g in groups if g.dense is not None]
        for group in groups:
            group.unshrunk = _unshrunk_copy(group.variable)

        state = _example_state_table()
        ids = self._example_ids(features)
        weights = (tf.reshape(tf.cast(features[weight_column_name], tf.float32), [-1])
                   if weight_column_name else tf.reshape(ones, [-1]))
        unique_ids = [tf.unique(g.feature_ids)[0] for g in sparse]
        new_state, sparse_deltas, dense_deltas = gen_sdca_ops.sdca_optimizer_v2(
            sparse_example_indices=[g.example_indices for g in sparse],
            sparse_feature_indices=[g.feature_ids for g in sparse],
            sparse_feature_values=[g.values for g in sparse],
            dense_features=[g.dense for g in dense],
            example_weights=weights,
            example_labels=tf.reshape(tf.cast(targets, tf.float32), [-1]),
            sparse_indices=unique_ids,
            sparse_weights=[tf.gather(tf.reshape(g.unshrunk, [-1]), u) for g, u in zip(sparse, unique_ids)],
            dense_weights=[tf.reshape(g.unshrunk, [-1]) for g in dense],
            example_state_data=state.lookup(ids),
            loss_type=loss_type, l1=self._l1, l2=self._l2, num_loss_partitions=self._num_loss_partitions,
            num_inner_iterations=1, adaptive=self._adaptive)
        updates = [state.insert(ids, new_state)]
        for group, ids_of_group, delta in zip(sparse, unique_ids, sparse_deltas):
            updates.append(group.unshrunk.scatter_add(tf.IndexedSlices(tf.reshape(delta, [-1, 1]), ids_of_group)))
        for group, delta in zip(dense, dense_deltas):
            updates.append(group.unshrunk.assign_add(tf.reshape(delta, group.unshrunk.shape)))
        with tf.control_dependencies(updates):
            shrunk = [group.variable.assign(self._shrink(group.unshrunk.read_value())) for group in groups]
        with tf.control_dependencies(shrunk):
            return tf.compat.v1.assign_add(global_step, 1).op

    def _example_ids(self, features: Mapping) -> tf.Tensor:
        if self._example_id_column not in features:
            raise InputFnError(f"LinearSDCA: the features need the example id column {self._example_id_column!r} "
                               f"(a string per example); input_fn returned {sorted(features)}.")
        ids = features[self._example_id_column]
        if isinstance(ids, tf.SparseTensor) or ids.dtype != tf.string:
            raise InputFnError(f"LinearSDCA: example ids ({self._example_id_column!r}) must be a dense string "
                               f"tensor; got {'a SparseTensor' if isinstance(ids, tf.SparseTensor) else ids.dtype}.")
        return tf.reshape(ids, [-1])

    def _shrink(self, weights: tf.Tensor) -> tf.Tensor:
        if not self._l1:
            return weights
        return tf.sign(weights) * tf.maximum(tf.abs(weights) - self._l1 / self._l2, 0.0)


@dataclasses.dataclass
class _Group:
    """One feature group of the solver: a column's (or the bias') weights and the batch's values for them."""

    variable: tf.Variable
    dense: tf.Tensor | None = None
    """[batch, width] values of a dense group; None for a sparse one."""
    example_indices: tf.Tensor | None = None
    feature_ids: tf.Tensor | None = None
    values: tf.Tensor | None = None
    unshrunk: tf.Variable | None = None
    """The solver's copy of `variable` (made by `get_train_step`)."""


def _group_of(column, cache: fc.FeatureTransformationCache, variable: tf.Variable) -> _Group:
    if isinstance(column, fc.CategoricalColumn):
        ids, id_weights = column.get_sparse_tensors(cache, None)
        values = (tf.cast(id_weights.values, tf.float32) if id_weights is not None
                  else tf.ones_like(ids.values, dtype=tf.float32))
        return _Group(variable, example_indices=ids.indices[:, 0], feature_ids=tf.cast(ids.values, tf.int64),
                      values=values)
    if isinstance(column, fc.DenseColumn):
        dense = column.get_dense_tensor(cache, None)
        return _Group(variable, dense=tf.reshape(tf.cast(dense, tf.float32), [tf.shape(dense)[0], -1]))
    raise ConfigError(f"LinearSDCA: {column!r} is neither a categorical nor a dense feature column "
                      "(tf.feature_column v2 columns are needed).")


def _unshrunk_copy(variable: tf.Variable) -> tf.Variable:
    """The solver's copy of `variable`'s weights (`<name>_unshrunk`), starting at zero as the model's do."""
    with tf.compat.v1.variable_scope(tf.compat.v1.VariableScope(reuse=tf.compat.v1.AUTO_REUSE, name="")):
        return tf.compat.v1.get_variable(variable.op.name + "_unshrunk", shape=variable.shape, dtype=tf.float32,
                                         initializer=tf.compat.v1.zeros_initializer(), trainable=False,
                                         use_resource=True)


def _example_state_table():
    return tf.lookup.experimental.MutableHashTable(tf.string, tf.float32, tf.zeros([_STATE_WIDTH]),
                                                  name=STATE_TABLE)
