"""Sequence models with tf.estimator.experimental.RNNClassifier / RNNEstimator, as their API reference shows them:
sequence feature columns (an embedding over a sequence categorical column, a sequence numeric column), a context
column repeated at each step, `units` + `cell_type`, an `rnn_cell_fn`, and `return_sequences` with per-step labels.
Each trains, evaluates, predicts and exports. Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
N, T, VOCAB = 384, 6, 10
LENGTHS = rng.randint(2, T + 1, size=N)
TOKENS = rng.randint(1, VOCAB, size=(N, T))
VALUES = rng.normal(size=(N, T)).astype("float32")
CONTEXT = rng.normal(size=(N, 1)).astype("float32")
STEPS = np.arange(T)[None, :] < LENGTHS[:, None]
HAS_SEVEN = ((TOKENS == 7) & STEPS).any(axis=1).astype("int64").reshape(-1, 1)  # the class label
BIG = (TOKENS > 5).astype("int64")  # a per-step label
TOTAL = ((VALUES * STEPS).sum(axis=1, keepdims=True) + CONTEXT).astype("float32")  # a regression label

TOKEN_COLUMN = tf.feature_column.embedding_column(
    tf.feature_column.sequence_categorical_column_with_identity("tokens", VOCAB), dimension=4)
VALUE_COLUMN = tf.feature_column.sequence_numeric_column("values")
CONTEXT_COLUMN = tf.feature_column.numeric_column("context")
FIRST_COLUMN = tf.feature_column.embedding_column(
    tf.feature_column.categorical_column_with_identity("first", VOCAB), dimension=2)


def sparse(matrix, dtype):
    """[N, T] as a SparseTensor of each row's first LENGTHS[i] entries, the way variable-length sequences come."""
    indices = np.argwhere(STEPS)
    return tf.SparseTensor(indices, matrix[STEPS].astype(dtype), [N, T])


def tight(features, labels):
    """Sparse sequences as a parser gives them: as long as the batch's longest sequence."""
    def fit(value):
        return tf.sparse.reset_shape(value) if isinstance(value, tf.SparseTensor) else value
    return {key: fit(value) for key, value in features.items()}, fit(labels)


def input_fn(label, training, per_step_label=False):
    def fn():
        features = {"tokens": sparse(TOKENS, "int64"), "values": sparse(VALUES, "float32"),
                    "context": tf.constant(CONTEXT), "first": tf.constant(TOKENS[:, :1])}
        labels = sparse(BIG, "int64") if per_step_label else tf.constant(label)
        dataset = tf.data.Dataset.from_tensor_slices((features, labels))
        dataset = (dataset.shuffle(N, seed=1).repeat() if training else dataset).batch(32)
        return dataset.map(tight)
    return fn


def serving_receiver():
    def fn():
        tokens = tf.compat.v1.placeholder(tf.int64, [None, None], name="tokens")
        values = tf.compat.v1.placeholder(tf.float32, [None, None], name="values")
        context = tf.compat.v1.placeholder(tf.float32, [None, 1], name="context")
        features = {"tokens": tf.sparse.from_dense(tokens), "values": tf.sparse.from_dense(values),
                    "context": context}
        return tf.estimator.export.ServingInputReceiver(features, {"tokens": tokens, "values": values,
                                                                  "context": context})
    return fn


def describe(estimator, model_dir, label, steps, per_step_label=False):
    estimator.train(input_fn(label, True, per_step_label), steps=steps)
    metrics = estimator.evaluate(input_fn(label, False, per_step_label))
    prediction = next(iter(estimator.predict(input_fn(label, False, per_step_label))))
    export = estimator.export_saved_model(os.path.join(model_dir, "export"), serving_receiver()).decode()
    signatures = tf.saved_model.load(export).signatures
    return {
        "metrics": {key: float(value) for key, value in metrics.items()},
        "predictions": {key: [np.asarray(value).dtype.name, list(np.asarray(value).shape)]
                        for key, value in prediction.items()},
        "signatures": {name: sorted(fn.structured_outputs) for name, fn in signatures.items()},
        "variables": sorted(name for name in estimator.get_variable_names()
                            if not any(slot in name for slot in ("Adagrad", "Adam", "_power"))),
    }


def main(model_dir):
    result = {}
    classifier = tf.estimator.experimental.RNNClassifier(
        sequence_feature_columns=[TOKEN_COLUMN, VALUE_COLUMN], context_feature_columns=[CONTEXT_COLUMN],
        units=[16], cell_type="lstm", model_dir=os.path.join(model_dir, "lstm"), optimizer="Adam")
    result["lstm_classifier"] = describe(classifier, classifier.model_dir, HAS_SEVEN, 400)

    def rnn_cell_fn():
        return tf.keras.layers.StackedRNNCells([tf.keras.layers.GRUCell(8), tf.keras.layers.GRUCell(4)])

    regressor = tf.estimator.experimental.RNNEstimator(
        tf.estimator.RegressionHead(), sequence_feature_columns=[VALUE_COLUMN],
        context_feature_columns=[CONTEXT_COLUMN], rnn_cell_fn=rnn_cell_fn,
        model_dir=os.path.join(model_dir, "stacked_gru"), optimizer="Adam")
    result["stacked_gru_regressor"] = describe(regressor, regressor.model_dir, TOTAL, 400)

    tagger = tf.estimator.experimental.RNNClassifier(
        sequence_feature_columns=[TOKEN_COLUMN], units=[8], return_sequences=True,
        model_dir=os.path.join(model_dir, "tagger"), optimizer="Adam")
    result["per_step_classifier"] = describe(tagger, tagger.model_dir, None, 300, per_step_label=True)

    default = tf.estimator.experimental.RNNClassifier([TOKEN_COLUMN], [FIRST_COLUMN], units=[4], n_classes=3,
                                                      model_dir=os.path.join(model_dir, "default"))
    default.train(input_fn(np.minimum(TOKENS[:, :1] // 3, 2).astype("int64"), True), steps=5)
    result["default_cell"] = sorted(n for n in default.get_variable_names() if "Adagrad" not in n)
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
