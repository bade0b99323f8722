"""`python -m elastimator.compat SCRIPT`: an unedited tf.estimator script, in a process of its own."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration


def test_an_unedited_tf_estimator_script_runs(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        import tensorflow as tf

        x = np.random.RandomState(0).normal(size=(200, 2)).astype("float32")
        y = (x[:, 0] + x[:, 1] > 0).astype("int64")
        classifier = tf.estimator.DNNClassifier(
            hidden_units=[8], feature_columns=[tf.feature_column.numeric_column("x", shape=[2])],
            model_dir={str(tmp_path / "model")!r}, optimizer="Adam")
        train = tf.compat.v1.estimator.inputs.numpy_input_fn({{"x": x}}, y, num_epochs=None, shuffle=True)
        classifier.train(train, max_steps=200)
        metrics = classifier.evaluate(tf.compat.v1.estimator.inputs.numpy_input_fn({{"x": x}}, y, shuffle=False))
        print("ACCURACY", metrics["accuracy"])
    """))
    result = subprocess.run([sys.executable, "-m", "elastimator.compat", str(script)], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    accuracy = float(next(line for line in result.stdout.splitlines() if line.startswith("ACCURACY")).split()[1])
    assert accuracy >= 0.9


def test_a_program_given_with_c_runs_as_python_c_runs_it(tmp_path):
    """`python -m elastimator.compat -c "..."`: a one-line check of what a framework imports."""
    program = ("import sys, tensorflow.compat.v2 as tf; "
               "from tensorflow_estimator.python.estimator import util; "
               "print(tf.compat.v1.estimator.Estimator.__module__, util.parse_input_fn_result.__name__, sys.argv[1:])")
    result = subprocess.run([sys.executable, "-m", "elastimator.compat", "-c", program, "a", "b"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["elastimator.estimator.estimator", "parse_input_fn_result", "['a',", "'b']"]
