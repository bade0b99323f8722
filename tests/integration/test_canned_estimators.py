"""Each canned estimator trained on real offline data (scikit-learn's sets, the bundled census) to a stated metric."""

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split

import elastimator as est

pytestmark = pytest.mark.integration
fc = tf.feature_column
SEEDED = est.RunConfig(tf_random_seed=7)  # Deterministic graph-level seed: thresholds hold on every run.


def _split(x, y, stratify=True):
    return train_test_split(x.astype("float32"), y, test_size=0.3, random_state=0, stratify=y if stratify else None)


def _standardize(train, test):
    mean, std = train.mean(0), train.std(0) + 1e-6
    return (train - mean) / std, (test - mean) / std


def _fit(estimator, x_train, y_train, x_test, y_test, steps, batch_size=32):
    estimator.train(est.inputs.numpy_input_fn({"x": x_train}, y_train, batch_size=batch_size, num_epochs=None,
                                              shuffle=True), max_steps=steps)
    return estimator.evaluate(est.inputs.numpy_input_fn({"x": x_test}, y_test, shuffle=False))


@pytest.fixture(scope="module")
def iris():
    x, y = load_iris(return_X_y=True)
    x_train, x_test, y_train, y_test = _split(x, y)
    x_train, x_test = _standardize(x_train, x_test)  # Raw iris scales made Adam's DNN converge unevenly.
    return x_train, y_train, x_test, y_test, [fc.numeric_column("x", shape=[4])]


@pytest.mark.parametrize("make", [
    lambda cols, d: est.DNNClassifier([16, 8], cols, n_classes=3, optimizer="Adam", model_dir=d, config=SEEDED),
    lambda cols, d: est.LinearClassifier(cols, n_classes=3, model_dir=d, config=SEEDED),
    lambda cols, d: est.DNNLinearCombinedClassifier(linear_feature_columns=cols, dnn_feature_columns=cols,
                                                    dnn_hidden_units=[16], n_classes=3, model_dir=d, config=SEEDED),
], ids=["dnn", "linear", "wide_deep"])
def test_iris_classifiers_reach_90_percent(iris, tmp_path, make):
    x_train, y_train, x_test, y_test, columns = iris
    metrics = _fit(make(columns, str(tmp_path)), x_train, y_train, x_test, y_test, steps=500)
    assert metrics["accuracy"] >= 0.9, metrics
    assert set(metrics) >= {"accuracy", "average_loss", "loss", "global_step"}


def test_baseline_classifier_learns_the_class_priors(iris, tmp_path):
    x_train, y_train, x_test, y_test, _ = iris
    baseline = est.BaselineClassifier(n_classes=3, model_dir=str(tmp_path), config=SEEDED)
    # Full-batch steps: the gradient is exact, so the bias settles on the priors instead of batch noise.
    metrics = _fit(baseline, x_train, y_train, x_test, y_test, steps=300, batch_size=len(x_train))
    # The three iris classes are equally frequent: the best feature-blind model predicts 1/3 each.
    assert metrics["average_loss"] == pytest.approx(np.log(3), abs=0.01)
    probabilities = next(est.BaselineClassifier(n_classes=3, model_dir=str(tmp_path), config=SEEDED).predict(
        est.inputs.numpy_input_fn({"x": x_test[:1]}, shuffle=False)))["probabilities"]
    np.testing.assert_allclose(probabilities, [1 / 3] * 3, atol=0.02)


@pytest.fixture(scope="module")
def breast_cancer():
    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = _split(x, y)
    x_train, x_test = _standardize(x_train, x_test)
    return x_train, y_train, x_test, y_test, [fc.numeric_column("x", shape=[30])]


def test_breast_cancer_binary_classifiers_reach_auc_097(breast_cancer, tmp_path):
    x_train, y_train, x_test, y_test, columns = breast_cancer
    linear = _fit(est.LinearClassifier(columns, model_dir=str(tmp_path / "linear"), config=SEEDED),
                  x_train, y_train, x_test, y_test, steps=300)
    dnn = _fit(est.DNNClassifier([32, 16], columns, dropout=0.2, batch_norm=True, model_dir=str(tmp_path / "dnn"),
                                 config=SEEDED),
               x_train, y_train, x_test, y_test, steps=300)
    for metrics in (linear, dnn):
        assert metrics["auc"] >= 0.97, metrics
        assert {"accuracy", "accuracy_baseline", "auc_precision_recall", "precision", "recall", "label/mean",
                "prediction/mean"} <= set(metrics)
    assert linear["label/mean"] == pytest.approx(y_test.mean(), abs=1e-4)


def test_string_labels_with_a_vocabulary_come_back_as_class_names(breast_cancer, tmp_path):
    x_train, y_train, x_test, y_test, columns = breast_cancer
    names = np.array(["malignant", "benign"])
    classifier = est.LinearClassifier(columns, label_vocabulary=list(names), model_dir=str(tmp_path), config=SEEDED)
    metrics = _fit(classifier, x_train, names[y_train], x_test, names[y_test], steps=200)
    assert metrics["accuracy"] >= 0.93
    predicted = [p["classes"][0].decode() for p in classifier.predict(
        est.inputs.numpy_input_fn({"x": x_test}, shuffle=False))]
    assert np.mean(np.array(predicted) == names[y_test]) == pytest.approx(metrics["accuracy"], abs=1e-6)


@pytest.fixture(scope="module")
def diabetes():
    x, y = load_diabetes(return_X_y=True)
    x_train, x_test, y_train, y_test = _split(x, y, stratify=False)
    x_train, x_test = _standardize(x_train, x_test)
    mean, std = y_train.mean(), y_train.std()
    return x_train, ((y_train - mean) / std).astype("float32"), x_test, ((y_test - mean) / std).astype("float32"), \
        [fc.numeric_column("x", shape=[10])]


@pytest.mark.parametrize("make, steps, margin", [
    (lambda cols, d: est.LinearRegressor(cols, model_dir=d, config=SEEDED), 1000, 0.05),
    (lambda cols, d: est.DNNRegressor([16], cols, optimizer=lambda: tf.compat.v1.train.AdamOptimizer(0.005),
                                      model_dir=d, config=SEEDED), 500, 0.15),
    (lambda cols, d: est.DNNLinearCombinedRegressor(linear_feature_columns=cols, dnn_feature_columns=cols,
                                                    dnn_hidden_units=[16], model_dir=d, config=SEEDED), 1000, 0.1),
], ids=["linear", "dnn", "wide_deep"])
def test_diabetes_regressors_come_close_to_least_squares(diabetes, tmp_path, make, steps, margin):
    x_train, y_train, x_test, y_test, columns = diabetes
    metrics = _fit(make(columns, str(tmp_path)), x_train, y_train, x_test, y_test, steps=steps, batch_size=64)
    r_squared = 1 - metrics["average_loss"] / y_test.var()
    reference = LinearRegression().fit(x_train, y_train).score(x_test, y_test)  # 0.40 on this split
    assert r_squared >= reference - margin, (r_squared, reference, metrics)
    assert {"label/mean", "prediction/mean"} <= set(metrics)


def test_baseline_regressor_predicts_the_label_mean(diabetes, tmp_path):
    x_train, y_train, x_test, y_test, _ = diabetes
    regressor = est.BaselineRegressor(model_dir=str(tmp_path), config=SEEDED)
    _fit(regressor, x_train, y_train, x_test, y_test, steps=500, batch_size=64)
    prediction = next(regressor.predict(est.inputs.numpy_input_fn({"x": x_test[:1]}, shuffle=False)))["predictions"]
    assert prediction[0] == pytest.approx(y_train.mean(), abs=0.05)


CENSUS_CATEGORICAL = ["workclass", "education", "marital_status", "occupation", "relationship", "race", "gender",
                      "native_country"]
CENSUS_NUMERIC = ["age", "educational_num", "capital_gain", "capital_loss", "hours_per_week"]


def _census(split):
    frame = pd.read_csv(f"examples/census/data/adult_{split}.csv")
    features = {c: frame[c].astype(str).values for c in CENSUS_CATEGORICAL}
    features.update({c: np.log1p(frame[c].values.astype("float32")) for c in CENSUS_NUMERIC})
    return features, frame["income_over_50k"].values


def test_deepfm_on_census_reaches_auc_088(tmp_path):
    train_x, train_y = _census("train")
    test_x, test_y = _census("test")
    categorical = [fc.categorical_column_with_hash_bucket(c, 200) for c in CENSUS_CATEGORICAL]
    numeric = [fc.numeric_column(c) for c in CENSUS_NUMERIC]
    model = est.DeepFMClassifier(linear_feature_columns=categorical + numeric,
                                 dnn_feature_columns=[fc.embedding_column(c, 8) for c in categorical] + numeric,
                                 dnn_hidden_units=[64, 32], dnn_optimizer="Adam", model_dir=str(tmp_path),
                                 config=SEEDED)
    model.train(est.inputs.numpy_input_fn(train_x, train_y, batch_size=256, num_epochs=None, shuffle=True),
                max_steps=1500)
    metrics = model.evaluate(est.inputs.numpy_input_fn(test_x, test_y, batch_size=1024, shuffle=False))
    assert metrics["auc"] >= 0.88, metrics


def test_binary_classifier_exports_classify_regress_and_predict_signatures(breast_cancer, tmp_path):
    x_train, y_train, x_test, y_test, columns = breast_cancer
    classifier = est.LinearClassifier(columns, model_dir=str(tmp_path / "model"), config=SEEDED)
    classifier.train(est.inputs.numpy_input_fn({"x": x_train}, y_train, num_epochs=None, shuffle=True), max_steps=50)
    receiver = est.export.build_parsing_serving_input_receiver_fn(fc.make_parse_example_spec(columns))
    path = classifier.export_saved_model(str(tmp_path / "export"), receiver)
    loaded = tf.saved_model.load(path.decode() if isinstance(path, bytes) else path)
    assert set(loaded.signatures) == {"serving_default", "classification", "regression", "predict"}
    example = tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=x_test[0]))})).SerializeToString()
    scores = loaded.signatures["classification"](inputs=tf.constant([example]))["scores"].numpy()
    expected = next(classifier.predict(est.inputs.numpy_input_fn({"x": x_test[:1]}, shuffle=False)))["probabilities"]
    np.testing.assert_allclose(scores[0], expected, rtol=1e-5)
