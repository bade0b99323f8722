"""DeepRec's embedding-variable spellings, served by `elastimator.embedding`.

DeepRec (Alibaba's TensorFlow 1.15 fork) added these to TensorFlow's own namespaces, and model code
calls them there: `tf.get_embedding_variable`, `tf.EmbeddingVariableOption`, `tf.CounterFilter`,
`tf.GlobalStepEvict`, `tf.InitializerOption`, `tf.StorageOption`,
`tf.feature_column.categorical_column_with_embedding`, and `tf.feature_column.embedding_column`
accepting such a column. `install()` sets them on `tf` and `tf.compat.v1`.
"""

from __future__ import annotations

import tensorflow as tf

from elastimator import embedding

TOP_LEVEL = ("get_embedding_variable", "EmbeddingVariableOption", "CounterFilter", "GlobalStepEvict",
             "InitializerOption", "StorageOption")


def attributes() -> list[tuple[object, str, object]]:
    """(owner, attribute, value) for every name DeepRec code uses."""
    names = []
    for owner in (tf, tf.compat.v1):
        names += [(owner, name, getattr(embedding, name)) for name in TOP_LEVEL]
    for owner in {id(m): m for m in (tf.feature_column, tf.compat.v1.feature_column)}.values():
        names.append((owner, "categorical_column_with_embedding", embedding.categorical_column_with_embedding))
        # Takes every categorical column: an embedding variable's makes an embedding-variable column, any other
        # TensorFlow's own embedding column.
        names.append((owner, "embedding_column", embedding.embedding_column))
    return names
