"""Heads: prediction and metric keys, losses, and the errors bad labels, logits and weights get."""

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.premade import get_optimizer_instance


def _run(fetches, feed=None):
    with tf.compat.v1.Session() as session:
        session.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer(),
                     tf.compat.v1.tables_initializer()])
        return session.run(fetches, feed)


def _eval_metrics(head, logits, labels, features=None):
    with tf.Graph().as_default():
        spec = head.create_estimator_spec(features or {}, est.ModeKeys.EVAL, tf.constant(logits, tf.float32),
                                          tf.constant(labels))
        updates = [u for _, u in spec.eval_metric_ops.values()]
        with tf.compat.v1.Session() as session:
            session.run([tf.compat.v1.local_variables_initializer(), tf.compat.v1.tables_initializer()])
            session.run(updates)
            return session.run({k: v for k, (v, _) in spec.eval_metric_ops.items()}), session.run(spec.loss)


def test_binary_head_predictions_and_metrics_carry_tf_estimator_keys():
    head = est.BinaryClassHead()
    with tf.Graph().as_default():
        predictions = _run(head.predictions(tf.constant([[-2.0], [3.0]])))
    assert set(predictions) == {"logits", "logistic", "probabilities", "class_ids", "classes", "all_class_ids",
                                "all_classes"}
    assert predictions["class_ids"].ravel().tolist() == [0, 1]
    assert predictions["classes"].ravel().tolist() == [b"0", b"1"]
    np.testing.assert_allclose(predictions["probabilities"].sum(1), 1.0, rtol=1e-6)
    metrics, _ = _eval_metrics(head, [[-2.0], [3.0], [1.0]], [[0], [1], [0]])
    assert {"accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "precision", "recall", "label/mean",
            "prediction/mean", "average_loss"} <= set(metrics)
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    assert metrics["label/mean"] == pytest.approx(1 / 3)
    assert metrics["accuracy_baseline"] == pytest.approx(2 / 3)


def test_loss_reduction_and_weights():
    logits, labels = [[0.0], [0.0], [0.0], [0.0]], [[1], [1], [0], [0]]
    features = {"w": np.array([1.0, 1.0, 2.0, 0.0], "float32")}  # weighted sum = ln 2 * 4
    per_example = np.log(2.0)
    with tf.Graph().as_default():
        summed = est.BinaryClassHead(weight_column="w", loss_reduction="sum").loss(
            tf.constant(labels), tf.constant(logits), features)
        over_batch = est.BinaryClassHead(weight_column="w").loss(tf.constant(labels), tf.constant(logits), features)
        assert _run(summed) == pytest.approx(4 * per_example, rel=1e-5)
        assert _run(over_batch) == pytest.approx(per_example, rel=1e-5)


def test_multi_class_head_with_vocabulary_maps_string_labels():
    head = est.MultiClassHead(3, label_vocabulary=["a", "b", "c"])
    metrics, _ = _eval_metrics(head, [[5.0, 0, 0], [0, 5.0, 0], [0, 0, 5.0]], [[b"a"], [b"b"], [b"a"]])
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    with tf.Graph().as_default():
        classes = _run(head.predictions(tf.constant([[0.0, 0, 9.0]])))["classes"]
    assert classes.ravel().tolist() == [b"c"]


def test_label_outside_vocabulary_or_n_classes_fails_naming_the_fix():
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in label_vocabulary"):
        _eval_metrics(est.MultiClassHead(3, label_vocabulary=["a", "b", "c"]), [[1.0, 0, 0]], [[b"zebra"]])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"class ids in \[0, 3\)"):
        _eval_metrics(est.MultiClassHead(3), [[1.0, 0, 0]], [[7]])
    with pytest.raises(est.HeadError, match="pass label_vocabulary"):
        _eval_metrics(est.BinaryClassHead(), [[1.0]], [[b"yes"]])


def test_logits_dimension_mismatch_names_both_sides():
    with pytest.raises(est.HeadError, match=r"expected logits of shape \[batch, 3\].*n_classes"):
        _eval_metrics(est.MultiClassHead(3), [[1.0, 0.0]], [[0]])


def test_missing_weight_column_names_the_features_present():
    with pytest.raises(est.HeadError, match=r"weight_column 'w' is not among the features \['x'\]"):
        _eval_metrics(est.BinaryClassHead(weight_column="w"), [[1.0]], [[1]], features={"x": np.array([1.0])})


def test_multi_label_head_takes_multi_hot_or_sparse_ids():
    head = est.MultiLabelHead(3)
    metrics, loss = _eval_metrics(head, [[9.0, -9.0, 9.0], [-9.0, 9.0, -9.0]], [[1, 0, 1], [0, 1, 0]])
    assert metrics["auc"] == pytest.approx(1.0, abs=1e-3) and loss < 1e-3
    with tf.Graph().as_default():
        sparse = tf.SparseTensor(indices=[[0, 0], [0, 1], [1, 0]], values=tf.constant([0, 2, 1], tf.int64),
                                 dense_shape=[2, 2])
        loss = head.loss(sparse, tf.constant([[9.0, -9.0, 9.0], [-9.0, 9.0, -9.0]]))
        assert _run(loss) < 1e-3


def test_regression_head_label_shape_mismatch():
    with pytest.raises(est.HeadError, match=r"labels of shape \[batch, 2\] \(label_dimension=2\)"):
        _eval_metrics(est.RegressionHead(label_dimension=2), [[1.0, 2.0]], [[1.0, 2.0, 3.0]])
    metrics, loss = _eval_metrics(est.RegressionHead(), [[1.0], [3.0]], [[2.0], [2.0]])
    assert loss == pytest.approx(1.0) and metrics["prediction/mean"] == pytest.approx(2.0)


def test_bad_head_and_optimizer_arguments():
    with pytest.raises(est.ConfigError, match="loss_reduction"):
        est.BinaryClassHead(loss_reduction="median")
    with pytest.raises(est.ConfigError, match="n_classes must be an int > 2"):
        est.MultiClassHead(2)
    with pytest.raises(est.ConfigError, match="unknown name 'Adamax'"):
        get_optimizer_instance("Adamax", 0.1)
    with pytest.raises(est.ConfigError, match=r"a tf.keras.optimizers.legacy optimizer, or a callable returning "
                                              r"one; got builtins.object"):
        get_optimizer_instance(object())


def test_canned_estimator_names_missing_features(tmp_path):
    columns = [tf.feature_column.numeric_column("age"), tf.feature_column.numeric_column("income")]
    classifier = est.LinearClassifier(columns, model_dir=str(tmp_path))
    input_fn = est.inputs.numpy_input_fn({"age": np.ones(4, "float32"), "height": np.ones(4, "float32")},
                                         np.zeros(4, "int64"), shuffle=False)
    with pytest.raises(est.InputFnError, match=r"feature\(s\) \['income'\].*returned \['age', 'height'\]"):
        classifier.train(input_fn, max_steps=1)
    assert not any(name.startswith("model.ckpt") for name in (p.name for p in tmp_path.iterdir()))


def test_deepfm_needs_embedding_fields_of_one_dimension():
    cat = tf.feature_column.categorical_column_with_hash_bucket
    a, b = cat("a", 10), cat("b", 10)
    with pytest.raises(est.ConfigError, match="one dimension"):
        est.DeepFMClassifier([a, b], [tf.feature_column.embedding_column(a, 4),
                                      tf.feature_column.embedding_column(b, 8)])
