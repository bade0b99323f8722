"""Embedding variables on stock TensorFlow: DeepRec's dynamic, collision-free embedding tables.

    import elastimator.embedding as emb

    table = emb.get_embedding_variable("user", embedding_dim=16, key_dtype=tf.int64,
                                       partitioner=tf.compat.v1.fixed_size_partitioner(2),
                                       ev_option=emb.EmbeddingVariableOption(
                                           filter_option=emb.CounterFilter(filter_freq=3),
                                           evict_option=emb.GlobalStepEvict(steps_to_live=10000)))
    vectors = tf.nn.embedding_lookup(table, features["user_id"])

With feature columns: `embedding_column(categorical_column_with_embedding("user_id", tf.int64), 16)`.
Under `elastimator.compat`, DeepRec's spellings (`tf.get_embedding_variable`,
`tf.EmbeddingVariableOption`, `tf.feature_column.categorical_column_with_embedding`, ...) are these.
"""

from __future__ import annotations

from elastimator.embedding.columns import categorical_column_with_embedding, embedding_column
from elastimator.embedding.lookup import embedding_lookup, embedding_lookup_sparse, safe_embedding_lookup_sparse
from elastimator.embedding.options import (
    CounterFilter,
    EmbeddingVariableOption,
    GlobalStepEvict,
    InitializerOption,
    StorageOption,
)
from elastimator.embedding.variable import EmbeddingVariable, embedding_variables, get_embedding_variable

__all__ = [
    "CounterFilter", "EmbeddingVariable", "EmbeddingVariableOption", "GlobalStepEvict", "InitializerOption",
    "StorageOption", "categorical_column_with_embedding", "embedding_column", "embedding_lookup",
    "embedding_lookup_sparse", "embedding_variables", "get_embedding_variable", "safe_embedding_lookup_sparse",
]
