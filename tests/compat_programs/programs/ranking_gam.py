"""TF-Ranking's neural generalized additive model (`tfr.estimator.make_gam_ranking_estimator`, as its
`examples/tf_ranking_canned_gam.py` builds it): a tower per document feature scores it alone, a tower per context
feature weights those sub-scores, and the export carries one signature per sub-score and sub-weight beside the
scores. Trained with `train_and_evaluate`, evaluated, used to predict and exported with a serving input that parses
serialized lists (`tfr.data.build_ranking_serving_input_receiver_fn`, here of tf.SequenceExamples); every signature
is served. Lists of 4 documents whose relevance follows their two features. Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
import tensorflow_ranking as tfr
from _ranking_lists import CONTEXT, DENSE, LABELS, LIST_SIZE, LISTS, QUERY_LENGTH

FEATURES = {"query_length": QUERY_LENGTH, "relevance_a": DENSE[:, :, :1], "relevance_b": DENSE[:, :, 1:]}
EXAMPLE = {name: tf.feature_column.numeric_column(name, shape=(1,), default_value=0.0)
           for name in ("relevance_a", "relevance_b")}


def input_fn(training):
    def fn():
        dataset = tf.data.Dataset.from_tensor_slices((FEATURES, LABELS))
        return (dataset.shuffle(LISTS, seed=1).repeat() if training else dataset).batch(32)
    return fn


def serialized_lists(count):
    """The first `count` lists as serialized tf.SequenceExamples: the query length in the context, a feature list
    per document feature."""
    lists = []
    for i in range(count):
        example = tf.train.SequenceExample()
        example.context.feature["query_length"].int64_list.value.append(int(QUERY_LENGTH[i, 0]))
        for name in EXAMPLE:
            for value in FEATURES[name][i, :, 0]:
                example.feature_lists.feature_list[name].feature.add().float_list.value.append(float(value))
        lists.append(example.SerializeToString())
    return tf.constant(lists)


def main(model_dir):
    tf.compat.v1.set_random_seed(7)
    estimator = tfr.estimator.make_gam_ranking_estimator(
        EXAMPLE, example_hidden_units=[8, 4], context_feature_columns=CONTEXT, context_hidden_units=[4],
        optimizer=tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1), loss="softmax_loss",
        model_dir=model_dir, checkpoint_secs=3600, listwise_inference=True)
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn=input_fn(True), max_steps=200),
        tf.estimator.EvalSpec(name="eval", input_fn=input_fn(False), steps=None, throttle_secs=0))
    metrics = estimator.evaluate(input_fn(False))
    scores = np.stack([np.asarray(p) for p in estimator.predict(input_fn(False))])
    serving_input_fn = tfr.data.build_ranking_serving_input_receiver_fn(
        tfr.data.SEQ, context_feature_spec=tf.feature_column.make_parse_example_spec(CONTEXT.values()),
        example_feature_spec=tf.feature_column.make_parse_example_spec(EXAMPLE.values()), list_size=LIST_SIZE)
    loaded = tf.saved_model.load(estimator.export_saved_model(os.path.join(model_dir, "export"), serving_input_fn))
    served = {}
    for name in sorted(loaded.signatures):
        signature = loaded.signatures[name]
        (input_name,) = signature.structured_input_signature[1]
        served[name] = {"input": input_name, **{key: list(value.shape) for key, value in
                                                signature(**{input_name: serialized_lists(4)}).items()}}
    predicted = next(iter(loaded.signatures["predict"](input_ranking_data=serialized_lists(4)).values())).numpy()
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "scores_shape": list(scores.shape),
        "served": served,  # every signature: its input's name, its outputs' keys and shapes
        "served_equals_predicted": bool(np.allclose(predicted, scores[:4], atol=1e-5)),
        "variables": sorted(estimator.get_variable_names()),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
