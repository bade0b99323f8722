"""Feature columns over embedding variables: `categorical_column_with_embedding` and its `embedding_column`.

    ids = categorical_column_with_embedding("C1", dtype=tf.string, ev_option=EmbeddingVariableOption())
    column = embedding_column(ids, dimension=16, combiner="mean")
    dense = tf.compat.v1.feature_column.input_layer(features, [column])  # or Keras' DenseFeatures

The categorical column passes the raw ids on (no vocabulary, no hash buckets); the embedding
column looks them up in an embedding variable named `embedding_weights` in the column's variable
scope, made with the scope's partitioner, as DeepRec's did. Both columns work with the v1
`input_layer` (and its `cols_to_output_tensors`) and with v2 `DenseFeatures`.
"""

from __future__ import annotations

import collections
import math

import tensorflow as tf
from tensorflow.python.feature_column import feature_column as fc_v1
from tensorflow.python.feature_column import feature_column_v2 as fc_v2

from elastimator._validate import is_int
from elastimator.embedding.lookup import embedding_lookup_sparse
from elastimator.embedding.options import EmbeddingVariableOption
from elastimator.embedding.variable import get_embedding_variable
from elastimator.errors import ConfigError

_tf_embedding_column = fc_v2.embedding_column


def _sparse_ids(column: "EmbeddingCategoricalColumn", feature) -> tf.SparseTensor:
    ids = fc_v2._to_sparse_input_and_drop_ignore_values(feature)  # pylint: disable=protected-access
    if (ids.dtype == tf.string) != (column.dtype == tf.string):
        raise ValueError(f"categorical_column_with_embedding({column.key!r}) has dtype {column.dtype.name}, but the "
                         f"feature {column.key!r} is {ids.dtype.name}. Give the column the feature's dtype.")
    if ids.dtype != tf.string and ids.dtype != tf.int64:
        ids = tf.SparseTensor(ids.indices, tf.cast(ids.values, tf.int64), ids.dense_shape)
    return ids


class EmbeddingCategoricalColumn(
        fc_v2.CategoricalColumn, fc_v1._CategoricalColumn,  # pylint: disable=protected-access
        collections.namedtuple("EmbeddingCategoricalColumn", ("key", "dtype", "partition_num", "ev_option"))):
    """Raw ids of feature `key`, for an embedding variable (see `categorical_column_with_embedding`)."""

    @property
    def _is_v2_column(self):
        return True

    @property
    def name(self):
        return self.key

    @property
    def parse_example_spec(self):
        return {self.key: tf.io.VarLenFeature(self.dtype)}

    _parse_example_spec = parse_example_spec

    @property
    def num_buckets(self):
        """Unbounded: every id gets a row of its own. (An indicator column cannot be made from this column.)"""
        return math.inf

    _num_buckets = num_buckets

    def transform_feature(self, transformation_cache, state_manager):
        return _sparse_ids(self, transformation_cache.get(self.key, state_manager))

    def _transform_feature(self, inputs):
        return _sparse_ids(self, inputs.get(self.key))

    def get_sparse_tensors(self, transformation_cache, state_manager):
        return fc_v2.CategoricalColumn.IdWeightPair(transformation_cache.get(self, state_manager), None)

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        del weight_collections, trainable
        return fc_v2.CategoricalColumn.IdWeightPair(inputs.get(self), None)

    @property
    def parents(self):
        return [self.key]


class EmbeddingVariableColumn(
        fc_v2.DenseColumn, fc_v1._DenseColumn,  # pylint: disable=protected-access
        collections.namedtuple("EmbeddingVariableColumn",
                               ("categorical_column", "dimension", "combiner", "initializer", "max_norm",
                                "trainable"))):
    """Rows of an embedding variable for a `categorical_column_with_embedding`, combined per example."""

    @property
    def _is_v2_column(self):
        return True

    @property
    def name(self):
        return f"{self.categorical_column.name}_embedding"

    @property
    def parse_example_spec(self):
        return self.categorical_column.parse_example_spec

    _parse_example_spec = parse_example_spec

    @property
    def variable_shape(self):
        return tf.TensorShape([self.dimension])

    _variable_shape = variable_shape

    @property
    def parents(self):
        return [self.categorical_column]

    def transform_feature(self, transformation_cache, state_manager):
        return transformation_cache.get(self.categorical_column, state_manager)

    def _transform_feature(self, inputs):
        return inputs.get(self.categorical_column)

    def _lookup(self, ids: fc_v2.CategoricalColumn.IdWeightPair) -> tf.Tensor:
        category = self.categorical_column
        partitioner = (tf.compat.v1.fixed_size_partitioner(category.partition_num)
                       if category.partition_num else None)
        variable = get_embedding_variable(
            "embedding_weights", self.dimension, key_dtype=category.dtype, initializer=self.initializer,
            trainable=self.trainable, partitioner=partitioner, ev_option=category.ev_option)
        return embedding_lookup_sparse(variable, ids.id_tensor, ids.weight_tensor, combiner=self.combiner,
                                       max_norm=self.max_norm)

    def get_dense_tensor(self, transformation_cache, state_manager):
        return self._lookup(self.categorical_column.get_sparse_tensors(transformation_cache, state_manager))

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        del weight_collections, trainable
        return self._lookup(self.categorical_column._get_sparse_tensors(inputs))  # pylint: disable=protected-access


def categorical_column_with_embedding(key: str, dtype=tf.string, partition_num: int | None = None,
                                      ev_option: EmbeddingVariableOption | None = None) -> EmbeddingCategoricalColumn:
    """A categorical column whose ids index an embedding variable directly (DeepRec's signature).

    Args:
        key: the feature's name.
        dtype: the ids' dtype: tf.string or an integer type.
        partition_num: partitions of the embedding variable; None uses the variable scope's partitioner.
        ev_option: the embedding variable's filter, eviction and initialization options.
    """
    dtype = tf.as_dtype(dtype)
    if not (dtype == tf.string or dtype.is_integer):
        raise ConfigError(f"categorical_column_with_embedding({key!r}): dtype must be tf.string or an integer type; "
                          f"got {dtype.name}.")
    if partition_num is not None and not is_int(partition_num, minimum=1):
        raise ConfigError(f"categorical_column_with_embedding({key!r}): partition_num must be a positive int or "
                          f"None; got {partition_num!r}.")
    option = ev_option if ev_option is not None else EmbeddingVariableOption()
    if not isinstance(option, EmbeddingVariableOption):
        raise ConfigError(f"categorical_column_with_embedding({key!r}): ev_option must be an EmbeddingVariableOption; "
                          f"got {type(option).__name__}.")
    return EmbeddingCategoricalColumn(key=key, dtype=tf.string if dtype == tf.string else tf.int64,
                                      partition_num=partition_num, ev_option=option)


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None, ckpt_to_load_from=None,
                     tensor_name_in_ckpt=None, max_norm=None, trainable=True, use_safe_embedding_lookup=True):
    """`tf.feature_column.embedding_column`, which also takes a `categorical_column_with_embedding`.

    For such a column the rows come from an embedding variable; any other categorical column gets
    TensorFlow's own embedding column, with every argument passed on.
    """
    if not isinstance(categorical_column, EmbeddingCategoricalColumn):
        return _tf_embedding_column(categorical_column, dimension, combiner=combiner, initializer=initializer,
                                    ckpt_to_load_from=ckpt_to_load_from, tensor_name_in_ckpt=tensor_name_in_ckpt,
                                    max_norm=max_norm, trainable=trainable,
                                    use_safe_embedding_lookup=use_safe_embedding_lookup)
    if not is_int(dimension, minimum=1):
        raise ConfigError(f"embedding_column({categorical_column.key!r}): dimension must be a positive int; got "
                          f"{dimension!r}.")
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ConfigError(f"embedding_column({categorical_column.key!r}): combiner must be 'mean', 'sqrtn' or 'sum'; "
                          f"got {combiner!r}.")
    if ckpt_to_load_from is not None or tensor_name_in_ckpt is not None:
        raise ConfigError(f"embedding_column({categorical_column.key!r}): ckpt_to_load_from is for dense embedding "
                          "tables; an embedding variable is restored with the model's own checkpoint.")
    if initializer is None:
        initializer = tf.compat.v1.truncated_normal_initializer(stddev=1 / math.sqrt(dimension))
    return EmbeddingVariableColumn(categorical_column=categorical_column, dimension=dimension, combiner=combiner,
                                   initializer=initializer, max_norm=max_norm, trainable=trainable)
