"""tf.compat.v1.estimator.experimental.KMeans as its API reference shows it: three well-separated blobs, trained
by full-batch and mini-batch K-means, then its centers, score, cluster indexes, distances, evaluation and export.
Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

rng = np.random.RandomState(0)
CENTERS = np.array([[0.0, 0.0], [6.0, 6.0], [-6.0, 6.0]], "float32")
POINTS = np.concatenate([c + rng.normal(scale=0.5, size=(100, 2)) for c in CENTERS]).astype("float32")


def input_fn():
    return tf.compat.v1.train.limit_epochs(tf.convert_to_tensor(POINTS), num_epochs=1)


def dataset_input_fn():
    return tf.data.Dataset.from_tensor_slices({"x": POINTS}).batch(60)


def run(model_dir, **kwargs):
    kmeans = tf.compat.v1.estimator.experimental.KMeans(3, model_dir=model_dir, seed=1, **kwargs)
    for _ in range(10):
        kmeans.train(input_fn)
    centers = sorted(map(tuple, np.round(kmeans.cluster_centers(), 1).tolist()))
    indexes = list(kmeans.predict_cluster_index(input_fn))
    distances = list(kmeans.transform(input_fn))
    same_blob = all(len(set(indexes[i:i + 100])) == 1 for i in (0, 100, 200)) and len(set(indexes)) == 3
    return {"centers": centers, "score": float(kmeans.score(input_fn)), "blobs_found": same_blob,
            "global_step": int(kmeans.get_variable_value("global_step")),
            "distances_shape": list(np.asarray(distances).shape), "index_dtype": np.asarray(indexes).dtype.name,
            "variables": sorted(n for n in kmeans.get_variable_names() if "global_step" not in n)}


def main(model_dir):
    result = {"full_batch": run(os.path.join(model_dir, "full"), use_mini_batch=False),
              "kmeans_plus_plus": run(os.path.join(model_dir, "pp"), use_mini_batch=False,
                                      initial_clusters=tf.compat.v1.estimator.experimental.KMeans.KMEANS_PLUS_PLUS_INIT)}
    kmeans = tf.compat.v1.estimator.experimental.KMeans(
        3, model_dir=os.path.join(model_dir, "columns"), seed=1, use_mini_batch=True,
        feature_columns=[tf.feature_column.numeric_column("x", shape=[2])])
    kmeans.train(lambda: dataset_input_fn().repeat(), steps=50)
    metrics = kmeans.evaluate(dataset_input_fn)
    prediction = next(iter(kmeans.predict(dataset_input_fn)))
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.constant(POINTS[:1])})
    export = kmeans.export_saved_model(os.path.join(model_dir, "export"), receiver).decode()
    signatures = tf.saved_model.load(export).signatures
    result["mini_batch_columns"] = {
        "metric_keys": sorted(metrics), "prediction_keys": sorted(prediction),
        "score_ok": bool(metrics["score"] < 200.0),
        "signatures": {name: sorted(fn.structured_outputs) for name, fn in signatures.items()}}
    print("RESULT " + json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
