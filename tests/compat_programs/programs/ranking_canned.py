"""TF-Ranking's canned Estimator path (`tfr.estimator.make_dnn_ranking_estimator`, as its
`examples/tf_ranking_canned_dnn.py` builds it): a DNN scoring function with an approximate-NDCG loss, trained with
`train_and_evaluate`, evaluated, used to predict and exported. Lists of 4 documents whose relevance follows a
feature. Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr

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


def main(model_dir):
    tf.compat.v1.set_random_seed(7)
    estimator = tfr.estimator.make_dnn_ranking_estimator(
        EXAMPLE, [16, 8], context_feature_columns=CONTEXT,
        optimizer=tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1), loss="approx_ndcg_loss",
        loss_reduction=tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE, activation_fn=tf.nn.relu,
        use_batch_norm=False, model_dir=model_dir, checkpoint_secs=3600, listwise_inference=True)
    train_spec = tf.estimator.TrainSpec(input_fn=input_fn(True), max_steps=200)
    eval_spec = tf.estimator.EvalSpec(name="eval", input_fn=input_fn(False), steps=None, throttle_secs=0)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    metrics = estimator.evaluate(input_fn(False))
    scores = np.stack([np.asarray(p) for p in estimator.predict(input_fn(False))])

    def serving_input_fn():
        placeholders = {"query_length": tf.compat.v1.placeholder(tf.int64, [None, 1], "query_length"),
                        "dense_feature": tf.compat.v1.placeholder(tf.float32, [None, LIST_SIZE, 2],
                                                                  "dense_feature")}
        return tf.estimator.export.ServingInputReceiver(placeholders, placeholders)

    export_dir = estimator.export_saved_model(model_dir + "/export", serving_input_fn)
    loaded = tf.saved_model.load(export_dir)
    signature = loaded.signatures["predict"]  # 2.15 wrote no serving_default here (a regression output)
    served = signature(query_length=tf.constant(QUERY_LENGTH[:4]), dense_feature=tf.constant(DENSE[:4]))
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "scores_shape": list(scores.shape),
        "signatures": sorted(loaded.signatures),
        "served_keys": sorted(served),
        "served_equals_predicted": bool(np.allclose(next(iter(served.values())).numpy(), scores[:4], atol=1e-5)),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
