"""The ranking data both TF-Ranking programs train on (not a program itself): lists of 4 documents whose relevance
follows a feature, a query-length context feature, their feature columns, input_fn and serving input."""
import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
LISTS, LIST_SIZE = 256, 4
DENSE = rng.normal(size=(LISTS, LIST_SIZE, 2)).astype("float32")
QUERY_LENGTH = rng.randint(1, 5, size=(LISTS, 1)).astype("int64")
LABELS = np.clip(np.round(DENSE[:, :, 0] - 0.5 * DENSE[:, :, 1] + 1.0), 0, 3).astype("float32")

CONTEXT = {"query_length": tf.feature_column.numeric_column("query_length", shape=(1,), dtype=tf.int64,
                                                             default_value=0)}
EXAMPLE = {"dense_feature": tf.feature_column.numeric_column("dense_feature", shape=(2,), default_value=0.0)}


def input_fn(training):
    def fn():
        features = {"query_length": QUERY_LENGTH, "dense_feature": DENSE}
        dataset = tf.data.Dataset.from_tensor_slices((features, LABELS))
        return (dataset.shuffle(LISTS, seed=1).repeat() if training else dataset).batch(32)
    return fn



def serving_input_fn():
    placeholders = {"query_length": tf.compat.v1.placeholder(tf.int64, [None, 1], "query_length"),
                    "dense_feature": tf.compat.v1.placeholder(tf.float32, [None, LIST_SIZE, 2], "dense_feature")}
    return tf.estimator.export.ServingInputReceiver(placeholders, placeholders)
