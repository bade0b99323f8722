"""TF-Ranking's Keras-to-Estimator path (`tfr.keras.estimator.model_to_estimator`, as its tests and guide build it):
a DNN ranking network made into a Keras ranking model with a softmax ranking loss and TF-Ranking's default metrics
(NDCG, MRR, ARP, ... as Keras metric objects), turned into an Estimator, trained with `train_and_evaluate`,
evaluated, used to predict and exported. Lists of 4 documents whose relevance follows a feature. Prints
`RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr
from _ranking_lists import CONTEXT, EXAMPLE, train_evaluate_predict_serve


def main(model_dir):
    tf.compat.v1.set_random_seed(7)
    network = tfr.keras.canned.DNNRankingNetwork(
        context_feature_columns=CONTEXT, example_feature_columns=EXAMPLE, hidden_layer_dims=[16, 8],
        activation=tf.nn.relu, use_batch_norm=False, dropout=0.0)
    model = tfr.keras.model.create_keras_model(
        network=network,
        loss=tfr.keras.losses.get(tfr.losses.RankingLossKey.SOFTMAX_LOSS,
                                  reduction=tf.compat.v2.losses.Reduction.SUM_OVER_BATCH_SIZE),
        metrics=tfr.keras.metrics.default_keras_metrics(),
        optimizer=tf.keras.optimizers.legacy.Adagrad(learning_rate=0.1), size_feature_name=None)
    estimator = tfr.keras.estimator.model_to_estimator(
        model=model, model_dir=model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=7, save_checkpoints_steps=100),
        serving_default="predict")
    metrics, scores, loaded, served = train_evaluate_predict_serve(estimator, model_dir)
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "scores_shape": list(scores.shape),
        "scores": np.round(scores[:2], 3).tolist(),
        "signatures": sorted(loaded.signatures),
        "served_keys": sorted(served),
        "served_scores": np.round(next(iter(served.values())).numpy()[:2], 3).tolist(),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
