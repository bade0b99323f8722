"""model_to_estimator: compiled Keras 3 models train, evaluate, predict and export as estimators."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split

import elastimator as est
from elastimator.keras import model_to_estimator


@pytest.fixture(scope="module")
def iris():
    x, y = load_iris(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x.astype("float32"), y, test_size=0.3, random_state=0,
                                                        stratify=y)
    return x_train, y_train, x_test, y_test


def _functional(optimizer=None):
    inputs = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(16, activation="relu")(inputs)
    outputs = keras.layers.Dense(3, name="scores")(keras.layers.Dropout(0.1)(hidden))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=optimizer or keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def test_functional_model_trains_evaluates_predicts_and_exports(iris, tmp_path):
    x_train, y_train, x_test, y_test = iris
    estimator = model_to_estimator(_functional(), model_dir=str(tmp_path / "model"),
                                   config=est.RunConfig(tf_random_seed=3))
    estimator.train(est.inputs.numpy_input_fn({"x": x_train}, y_train, num_epochs=None, shuffle=True), max_steps=300)
    metrics = estimator.evaluate(est.inputs.numpy_input_fn({"x": x_test}, y_test, shuffle=False))
    assert metrics["accuracy"] >= 0.9, metrics
    prediction = next(estimator.predict(est.inputs.numpy_input_fn({"x": x_test[:1]}, shuffle=False)))
    assert set(prediction) == {"scores"} and prediction["scores"].shape == (3,)
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": tf.TensorSpec([None, 4], tf.float32)})
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver)
    served = tf.saved_model.load(path.decode() if isinstance(path, bytes) else path).signatures["serving_default"]
    np.testing.assert_allclose(served(x=tf.constant(x_test[:1]))["scores"].numpy()[0], prediction["scores"], rtol=1e-5)


def test_training_starts_from_the_keras_models_weights(iris, tmp_path):
    x_train, y_train, _, _ = iris
    model = _functional(optimizer=keras.optimizers.SGD(learning_rate=0.0))  # a step changes nothing
    estimator = model_to_estimator(model, model_dir=str(tmp_path))
    estimator.train(est.inputs.numpy_input_fn({"x": x_train}, y_train, num_epochs=None, shuffle=False), max_steps=1)
    kernel = model.get_layer("scores").kernel.numpy()
    np.testing.assert_array_equal(estimator.get_variable_value("scores/kernel"), kernel)


class Scorer(keras.Model):
    def __init__(self, units=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.dense = keras.layers.Dense(units)

    def call(self, inputs):
        return self.dense(inputs)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


class Forgetful(Scorer):
    def get_config(self):  # Forgets `units`: the rebuilt model would not match.
        return keras.Model.get_config(self)


def test_subclassed_model_with_get_config_trains(iris, tmp_path):
    x_train, y_train, x_test, y_test = iris
    model = Scorer(units=3)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model(x_train[:1])
    estimator = model_to_estimator(model, model_dir=str(tmp_path))
    estimator.train(est.inputs.numpy_input_fn(x_train, y_train, num_epochs=None, shuffle=True), max_steps=20)
    assert estimator.evaluate(est.inputs.numpy_input_fn(x_test, y_test, shuffle=False))["global_step"] == 20


def test_models_that_cannot_run_as_estimators_are_refused_by_name(iris, tmp_path):
    x_train, y_train, _, _ = iris
    with pytest.raises(est.ConfigError, match=r"not compiled. Call model.compile"):
        model_to_estimator(keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)]))
    adamw = _functional(optimizer=keras.optimizers.AdamW())
    with pytest.raises(est.ConfigError, match="AdamW, which has no graph-mode equivalent"):
        model_to_estimator(adamw)
    forgetful = Forgetful(units=7)
    forgetful.compile(optimizer="sgd", loss="mse")
    forgetful(x_train[:1])
    estimator = model_to_estimator(forgetful, model_dir=str(tmp_path))
    with pytest.raises(est.ConfigError, match=r"get_config\(\) must return the constructor arguments"):
        estimator.train(est.inputs.numpy_input_fn(x_train, y_train.astype("float32"), num_epochs=None, shuffle=False),
                        max_steps=1)
