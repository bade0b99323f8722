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
from _ranking_lists import CONTEXT, EXAMPLE, train_evaluate_predict_serve


def main(model_dir):
    tf.compat.v1.set_random_seed(7)
    estimator = tfr.estimator.make_dnn_ranking_estimator(
        EXAMPLE, [16, 8], context_feature_columns=CONTEXT,
        optimizer=tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1), loss="approx_ndcg_loss",
        loss_reduction=tf.compat.v1.losses.Reduction.SUM_OVER_BATCH_SIZE, activation_fn=tf.nn.relu,
        use_batch_norm=False, model_dir=model_dir, checkpoint_secs=3600, listwise_inference=True)
    metrics, scores, loaded, served = train_evaluate_predict_serve(estimator, model_dir)
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "scores_shape": list(scores.shape),
        "signatures": sorted(loaded.signatures),
        "served_keys": sorted(served),
        "served_equals_predicted": bool(np.allclose(next(iter(served.values())).numpy(), scores[:4], atol=1e-5)),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
