"""The command line's quiet, TensorFlow-free start, in processes of their own."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration
CLI = os.path.join(os.path.dirname(sys.executable), "elastimator")


def test_no_tensorflow_is_one_clear_import_error():
    program = ("import sys; sys.modules['tensorflow'] = None\n"
               "import elastimator\n"
               "try:\n    elastimator.Estimator\n"
               "except ImportError as e:\n    print(type(e).__name__, e)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert "UnsupportedTensorFlowError elastimator needs TensorFlow 2.16 to 2.21, and none is installed" in (
        result.stdout), result.stderr


def test_help_of_every_command_never_imports_tensorflow():
    program = ("import sys\nfrom elastimator.cli import _parser\n"
               "for command in ([], ['run'], ['export'], ['predict'], ['inspect'], ['report'], ['launch'], "
               "['scale'], ['shard-service'], ['k8s'], ['k8s', 'manifest'], ['k8s', 'validate']):\n"
               "    try:\n        _parser().parse_args([*command, '--help'])\n"
               "    except SystemExit:\n        pass\n"
               "print('tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "False", result.stderr


def test_a_command_shows_no_native_load_noise_unless_verbose(tmp_path):
    """`inspect` imports TensorFlow; absl's and CUDA's load-time lines stay out of the user's way."""
    quiet = subprocess.run([CLI, "inspect", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert "absl::InitializeLog" not in quiet.stderr and "cudart_stub" not in quiet.stderr, quiet.stderr
    assert "Traceback" not in quiet.stderr


def test_the_launcher_does_not_import_tensorflow():
    """`elastimator launch` supervises processes; each of them loads TensorFlow, the launcher never does."""
    program = "import sys\nimport elastimator.cluster.launcher\nprint('tensorflow' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "False", result.stderr


def test_keras_loads_where_a_program_first_uses_it():
    """TensorFlow imports Keras eagerly; imported by elastimator, it does not, and Keras comes when used."""
    program = (
        "import sys\nimport elastimator as est\nest.Estimator\n"
        "print(sorted(m for m in ('keras', 'tf_keras', 'pandas', 'matplotlib') if m in sys.modules))\n"
        "import tensorflow as tf\n"
        "with tf.Graph().as_default():\n"
        "    print(tf.compat.v1.layers.dense(tf.zeros([2, 3]), 4).shape, type(tf.keras.layers.Dense(1)).__module__)\n"
        "import keras\nprint(keras.layers.Dense.__module__)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    deferred, layers, keras3 = result.stdout.splitlines()[-3:]
    assert deferred == "[]"
    assert layers.startswith("(2, 4) tf_keras.") and keras3.startswith("keras.")
