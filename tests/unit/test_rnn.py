"""RNNEstimator / RNNClassifier: argument rules, the sequence mask, and mistakes in sequence features.

(What 2.15 did with the same programs is compared in tests/compat_programs/test_programs.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from elastimator import ConfigError, RunConfig
from elastimator.experimental import RNNClassifier, RNNEstimator
from elastimator.premade import RegressionHead

TOKENS = tf.feature_column.sequence_categorical_column_with_identity("tokens", 5)
TOKEN_EMBEDDING = tf.feature_column.embedding_column(TOKENS, 3)
VALUES = tf.feature_column.sequence_numeric_column("values")


def _sparse(rows, dtype):
    """Variable-length rows as a SparseTensor, as a parser gives them."""
    indices = [[i, j] for i, row in enumerate(rows) for j in range(len(row))]
    values = np.array([v for row in rows for v in row], dtype=dtype)
    return tf.SparseTensor(indices, values, [len(rows), max(map(len, rows))])


def _input_fn(features, labels):
    def fn():
        return tf.data.Dataset.from_tensors((features(), labels())).repeat()
    return fn


def test_cells_come_from_units_or_from_rnn_cell_fn_never_both():
    with pytest.raises(ValueError, match="either rnn_cell_fn, or units and cell_type"):
        RNNClassifier([VALUES], units=[4], rnn_cell_fn=lambda: tf.keras.layers.LSTMCell(4))
    with pytest.raises(ValueError, match="pass units"):
        RNNClassifier([VALUES])
    with pytest.raises(ValueError, match="cell_type: expected one of"):
        RNNClassifier([VALUES], units=[4], cell_type="transformer")


def test_a_per_example_column_among_the_sequence_columns_points_to_the_context():
    dense = tf.feature_column.numeric_column("age")
    with pytest.raises(ValueError, match="context_feature_columns"):
        RNNEstimator(RegressionHead(), [dense], units=[4])
    with pytest.raises(ValueError, match="not sequence columns"):
        RNNEstimator(RegressionHead(), [VALUES], context_feature_columns=[VALUES], units=[4])


def test_sequence_features_of_different_lengths_fail_naming_the_columns(tmp_path):
    def features():
        return {"tokens": _sparse([[1, 2, 3], [4]], "int64"), "values": _sparse([[0.5, 1.0], [2.0]], "float32")}
    classifier = RNNClassifier([TOKEN_EMBEDDING, VALUES], units=[2], model_dir=str(tmp_path),
                               config=RunConfig(tf_random_seed=1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="tokens_embedding and values give an example different lengths"):
        classifier.train(_input_fn(features, lambda: tf.constant([[1], [0]])), steps=1)
    assert classifier.latest_checkpoint().endswith("model.ckpt-0")  # no step was taken


def test_a_given_sequence_mask_decides_which_steps_count(tmp_path):
    """With return_sequences, the mask in the features (here: only each example's first step) limits the loss and
    metrics to those steps, and comes back as a prediction."""
    def features():
        return {"values": _sparse([[1.0, 2.0, 3.0], [4.0, 5.0]], "float32"),
                "sequence_mask": tf.constant([[True, False, False], [True, False, False]])}

    def labels():
        return _sparse([[1, 0, 0], [1, 0]], "int64")  # label 1 at every step the mask keeps
    classifier = RNNClassifier([VALUES], units=[2], return_sequences=True, model_dir=str(tmp_path))
    classifier.train(_input_fn(features, labels), steps=2)
    metrics = classifier.evaluate(_input_fn(features, labels), steps=1)
    assert metrics["label/mean"] == 1.0  # the unmasked label-0 steps were left out
    prediction = next(classifier.predict(_input_fn(features, labels), yield_single_examples=False))
    assert prediction["sequence_mask"].tolist() == [[True, False, False], [True, False, False]]
    assert prediction["probabilities"].shape == (2, 3, 2)
    assert prediction["all_class_ids"].tolist() == [[0, 1], [0, 1]]  # once per example, not per step
