"""`tf_keras.estimator.model_to_estimator`, the spelling tf-keras users on TensorFlow >= 2.16 were told to use,
under `python -m elastimator.compat`: it trains as `tf.keras.estimator.model_to_estimator` does (tf-keras's own
function imports tensorflow_estimator's keras_lib, and raised NotImplementedError without it)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = """
import json
import numpy as np
import tensorflow as tf
import tf_keras

x = np.random.RandomState(0).normal(size=(64, 2)).astype("float32")
y = (x @ np.array([[1.0], [-2.0]], "float32"))
results = {}
for spelling, to_estimator in (("tf_keras", tf_keras.estimator.model_to_estimator),
                               ("tf.keras", tf.keras.estimator.model_to_estimator)):
    model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(2,), kernel_initializer="zeros")])
    model.compile(tf_keras.optimizers.SGD(0.1), "mse")
    estimator = to_estimator(keras_model=model, model_dir=f"{MODEL_DIR}/{spelling}")
    name = model.input_names[0]
    data = lambda: tf.data.Dataset.from_tensor_slices(({name: x}, y)).batch(16)
    estimator.train(lambda: data().repeat(), steps=40)
    results[spelling] = float(estimator.evaluate(data)["loss"])
print("RESULT", json.dumps(results))
"""


def test_tf_keras_estimator_model_to_estimator_trains_under_compat(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(f"MODEL_DIR = {str(tmp_path)!r}\n" + textwrap.dedent(PROGRAM))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.path.join(ROOT, "src"))
    result = subprocess.run([sys.executable, "-m", "elastimator.compat", str(script)], capture_output=True,
                            text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("RESULT"))[7:])
    initial = float(((__import__("numpy").random.RandomState(0).normal(size=(64, 2)) @ [1.0, -2.0]) ** 2).mean())
    assert losses["tf_keras"] == pytest.approx(losses["tf.keras"], rel=1e-5)
    assert losses["tf_keras"] < 0.1 * initial  # it trained
