"""DeepFMClassifier: wide & deep plus a factorization machine over the shared embeddings.

DeepFM (Guo et al., 2017) adds to the linear and deep logits the FM term: the sum of
pairwise dot products of the fields' embeddings, computed in O(fields x dim) as
0.5 * sum_k ((sum_f v_fk)^2 - sum_f v_fk^2). The DNN and the FM read the same
embedding variables, so the interactions and the deep part train them together.
"""

from __future__ import annotations

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.premade.canned import classification_head
from elastimator.premade.dnn import dnn_logits
from elastimator.premade.features import dense_input, embedding_dimension, is_embedding
from elastimator.premade.wide_deep import WideAndDeep


def fm_logit(embeddings: tf.Tensor) -> tf.Tensor:
    """The FM second-order term of [batch, fields, dim] embeddings: [batch, 1]."""
    square_of_sum = tf.square(tf.reduce_sum(embeddings, axis=1))
    sum_of_squares = tf.reduce_sum(tf.square(embeddings), axis=1)
    return 0.5 * tf.reduce_sum(square_of_sum - sum_of_squares, axis=1, keepdims=True)


class DeepFMClassifier(WideAndDeep):
    """DeepFM for binary (CTR) classification.

    Args:
        linear_feature_columns: Columns of the first-order (linear) part.
        dnn_feature_columns: Embedding columns, all of one dimension (the FM fields), plus any
            dense columns (which feed the DNN only).
        dnn_hidden_units: DNN widths (default `[128, 64]`).
        linear_optimizer, dnn_optimizer: 'Ftrl' and 'Adagrad' by default, as in wide & deep.
        Others: as for `DNNLinearCombinedClassifier`.

    Example:
        >>> c1 = tf.feature_column.categorical_column_with_hash_bucket("C1", 10_000)
        >>> model = DeepFMClassifier(linear_feature_columns=[c1],
        ...                          dnn_feature_columns=[tf.feature_column.embedding_column(c1, 8)])
    """

    def __init__(self, linear_feature_columns, dnn_feature_columns, model_dir=None, dnn_hidden_units=(128, 64),
                 dnn_activation_fn=tf.nn.relu, dnn_dropout=None, batch_norm: bool = False,
                 linear_optimizer="Ftrl", dnn_optimizer="Adagrad", n_classes: int = 2, weight_column=None,
                 label_vocabulary=None, config=None, warm_start_from=None, loss_reduction="sum_over_batch_size",
                 linear_sparse_combiner: str = "sum"):
        head = classification_head(n_classes, weight_column, label_vocabulary, loss_reduction)
        embeddings = [c for c in dnn_feature_columns or () if is_embedding(c)]
        dimensions = {embedding_dimension(c) for c in embeddings}
        if len(embeddings) < 2 or len(dimensions) != 1:
            raise ConfigError(
                "DeepFMClassifier: dnn_feature_columns need at least two embedding columns of one dimension (the FM "
                f"fields); got {len(embeddings)} with dimensions {sorted(dimensions)}."
            )
        self._fm_columns = tuple(embeddings)
        super().__init__(head, linear_feature_columns=linear_feature_columns, linear_optimizer=linear_optimizer,
                         dnn_feature_columns=dnn_feature_columns, dnn_optimizer=dnn_optimizer,
                         dnn_hidden_units=dnn_hidden_units, dnn_activation_fn=dnn_activation_fn,
                         dnn_dropout=dnn_dropout, batch_norm=batch_norm, linear_sparse_combiner=linear_sparse_combiner,
                         model_dir=model_dir, config=config, warm_start_from=warm_start_from)

    def _deep_logits(self, features, units, training):
        dense_columns = [c for c in self._dnn_columns if not is_embedding(c)]
        with tf.compat.v1.variable_scope("input_from_feature_columns"):
            fields = dense_input(features, self._fm_columns)  # [batch, fields * dim], the shared embeddings
            net = tf.concat([fields, dense_input(features, dense_columns)], 1) if dense_columns else fields
        dim = embedding_dimension(self._fm_columns[0])
        embeddings = tf.reshape(fields, [-1, len(self._fm_columns), dim])
        deep = dnn_logits(net, hidden_units=self._hidden_units, units=units, activation=self._activation,
                          dropout=self._dropout, batch_norm=self._batch_norm, training=training)
        return deep + fm_logit(embeddings)
