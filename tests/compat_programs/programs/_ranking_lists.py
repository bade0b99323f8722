"""What both TF-Ranking programs share (not a program itself): lists of 4 documents whose relevance follows a
feature, a query-length context feature, their feature columns, input_fn and serving input, and the path an
estimator takes over them: train_and_evaluate, evaluate, predict, export, serve."""
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


def train_evaluate_predict_serve(estimator, model_dir):
    """(metrics, scores of every list, the loaded export, what its predict signature served for 4 lists)."""
    train_spec = tf.estimator.TrainSpec(input_fn=input_fn(True), max_steps=200)
    eval_spec = tf.estimator.EvalSpec(name="eval", input_fn=input_fn(False), steps=None, throttle_secs=0)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    metrics = estimator.evaluate(input_fn(False))
    scores = np.stack([np.asarray(p) for p in estimator.predict(input_fn(False))])
    loaded = tf.saved_model.load(estimator.export_saved_model(model_dir + "/export", serving_input_fn))
    # "predict": 2.15 wrote no serving_default where that was a regression output of these inputs.
    served = loaded.signatures["predict"](query_length=tf.constant(QUERY_LENGTH[:4]),
                                         dense_feature=tf.constant(DENSE[:4]))
    return metrics, scores, loaded, served
