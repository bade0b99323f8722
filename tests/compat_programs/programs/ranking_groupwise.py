"""TF-Ranking's groupwise model_fn path, in the style of its TF 1.x estimator example (`tf_ranking_libsvm.py`):
`tfr.model.make_groupwise_ranking_fn` scoring groups of 2 documents with a batch-normalised DNN,
`tfr.head.create_ranking_head` with a pairwise logistic loss, ranking metrics and a `train_op_fn` that runs the
UPDATE_OPS, a `transform_fn` of `tfr.feature.encode_listwise_features`, and inputs fed from numpy through
placeholders into an initializable iterator that an `IteratorInitializerHook` initializes once its session
exists. Trained with `train_and_evaluate`, evaluated, used to predict and exported. Lists of 4 documents whose
relevance follows their two features (per-document features "1" and "2", as LibSVM's). Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr
from _ranking_lists import DENSE, LABELS, LIST_SIZE

FEATURES = {"1": DENSE[:, :, :1], "2": DENSE[:, :, 1:]}
GROUP_SIZE = 2


class IteratorInitializerHook(tf.estimator.SessionRunHook):
    """Runs the input's iterator initializer, with the numpy data fed, once the session exists."""

    def __init__(self):
        super().__init__()
        self.iterator_initializer_fn = None

    def after_create_session(self, session, coord):
        del coord
        self.iterator_initializer_fn(session)


def example_feature_columns():
    return {name: tf.feature_column.numeric_column(name, shape=(1,), default_value=0.0) for name in FEATURES}


def numpy_input(features, labels, batch_size=None, training=False):
    """(input_fn, hook): the input_fn feeds `features` and `labels` through placeholders; the hook initializes."""
    hook = IteratorInitializerHook()

    def input_fn():
        feature_placeholders = {k: tf.compat.v1.placeholder(v.dtype, v.shape) for k, v in features.items()}
        label_placeholder = tf.compat.v1.placeholder(labels.dtype, labels.shape)
        pair = (feature_placeholders, label_placeholder)
        if training:
            dataset = tf.data.Dataset.from_tensor_slices(pair).shuffle(256, seed=1).repeat().batch(batch_size)
        else:  # the whole set as one batch, as the example evaluates
            dataset = tf.data.Dataset.from_tensors(pair)
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        feed_dict = {label_placeholder: labels, **{feature_placeholders[k]: features[k] for k in features}}
        hook.iterator_initializer_fn = lambda session: session.run(iterator.initializer, feed_dict=feed_dict)
        return iterator.get_next()

    return input_fn, hook


def transform_fn(features, mode):
    return tfr.feature.encode_listwise_features(
        features=features, context_feature_columns=None, example_feature_columns=example_feature_columns(),
        mode=mode, scope="transform_layer")


def group_score_fn(unused_context_features, group_features, mode, unused_params, unused_config):
    with tf.compat.v1.name_scope("input_layer"):
        layer = tf.concat([tf.compat.v1.layers.flatten(group_features[name])
                           for name in sorted(example_feature_columns())], 1)
    training = mode == tf.estimator.ModeKeys.TRAIN
    layer = tf.compat.v1.layers.batch_normalization(layer, training=training)
    for width in (16, 8):
        layer = tf.compat.v1.layers.dense(layer, units=width)
        layer = tf.nn.relu(tf.compat.v1.layers.batch_normalization(layer, training=training))
    return tf.compat.v1.layers.dense(layer, units=GROUP_SIZE)


def eval_metric_fns():
    metrics = {f"metric/{name}": tfr.metrics.make_ranking_metric_fn(name)
               for name in (tfr.metrics.RankingMetricKey.ARP, tfr.metrics.RankingMetricKey.ORDERED_PAIR_ACCURACY)}
    metrics.update({f"metric/ndcg@{topn}": tfr.metrics.make_ranking_metric_fn(
        tfr.metrics.RankingMetricKey.NDCG, topn=topn) for topn in (1, 3)})
    return metrics


def main(model_dir):
    optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1)

    def train_op_fn(loss):
        update_ops = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
        minimize = optimizer.minimize(loss=loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.group([minimize, update_ops])

    head = tfr.head.create_ranking_head(loss_fn=tfr.losses.make_loss_fn("pairwise_logistic_loss"),
                                        eval_metric_fns=eval_metric_fns(), train_op_fn=train_op_fn)
    estimator = tf.estimator.Estimator(
        model_fn=tfr.model.make_groupwise_ranking_fn(group_score_fn=group_score_fn, group_size=GROUP_SIZE,
                                                     transform_fn=transform_fn, ranking_head=head),
        config=tf.estimator.RunConfig(model_dir, tf_random_seed=7, save_checkpoints_steps=100))
    train_fn, train_hook = numpy_input(FEATURES, LABELS, batch_size=32, training=True)
    vali_fn, vali_hook = numpy_input(FEATURES, LABELS)
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn=train_fn, hooks=[train_hook], max_steps=200),
        tf.estimator.EvalSpec(input_fn=vali_fn, hooks=[vali_hook], steps=1, start_delay_secs=0, throttle_secs=0))
    test_fn, test_hook = numpy_input(FEATURES, LABELS)
    metrics = estimator.evaluate(input_fn=test_fn, hooks=[test_hook])
    predict_fn, predict_hook = numpy_input(FEATURES, LABELS)
    scores = np.stack(list(estimator.predict(predict_fn, hooks=[predict_hook])))

    def serving_input_fn():
        placeholders = {name: tf.compat.v1.placeholder(tf.float32, [None, LIST_SIZE, 1], name) for name in FEATURES}
        return tf.estimator.export.ServingInputReceiver(placeholders, placeholders)

    loaded = tf.saved_model.load(estimator.export_saved_model(os.path.join(model_dir, "export"), serving_input_fn))
    served = loaded.signatures["predict"](**{name: tf.constant(FEATURES[name][:4]) for name in FEATURES})
    state = tf.train.get_checkpoint_state(model_dir)
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "scores_shape": list(scores.shape),
        "signatures": sorted(loaded.signatures),
        "served_keys": sorted(served),
        "served_equals_predicted": bool(np.allclose(next(iter(served.values())).numpy(), scores[:4], atol=1e-5)),
        "checkpoints": [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        "variables": sorted(estimator.get_variable_names()),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
