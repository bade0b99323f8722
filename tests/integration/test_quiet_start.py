"""The command line's quiet, TensorFlow-free start, in processes of their own."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration
CLI = os.path.join(os.path.dirname(sys.executable), "elastimator")


def test_no_tensorflow_is_one_clear_import_error():
    program = ("import sys; sys.modules['tensorflow'] = None\n"
               "try:\n    import elastimator\n"  # at the import itself, not at the first use
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


def _native_lines(program: str) -> list[str]:
    from elastimator.tensorflow_import import NATIVE_LOG_LINE  # pylint: disable=import-outside-toplevel

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # TensorFlow's own default
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0 and "trained" in result.stdout, result.stderr[-3000:]
    return [line for line in result.stderr.splitlines() if NATIVE_LOG_LINE.match(line)]


TRAIN = ("import numpy as np\n"
         "est = elastimator\n"
         "def model_fn(features, labels, mode):\n"
         "    w = tf.compat.v1.get_variable('w', [1])\n"
         "    loss = tf.reduce_mean(tf.square(features['x'] * w - labels))\n"
         "    op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())\n"
         "    return est.EstimatorSpec(mode, loss=loss, train_op=op)\n"
         "x = np.ones((8, 1), np.float32)\n"
         "est.Estimator(model_fn).train(est.inputs.numpy_input_fn({'x': x}, x, shuffle=False), steps=2)\n"
         "print('trained')\n")


def _no_gpu() -> bool:
    return not os.path.exists("/dev/nvidia0")


def test_a_program_that_imports_elastimator_first_starts_quietly():
    """TensorFlow 2.21 prints its native start-up block twice as it loads, and on a machine without a GPU a
    "failed call to cuInit" error line that is none. Imported after elastimator, TensorFlow prints neither; a
    program that imports TensorFlow first has printed them before elastimator is loaded."""
    # Which of these TensorFlow prints depends on the CPU and the machine (oneDNN's line only where its
    # optimisations are on by default, cpu_feature_guard's where TensorFlow was built without the CPU's
    # instructions, cudart_stub's and cuInit's without a GPU): the program run both ways says what this one prints.
    start_up = ("oneDNN custom operations", "cudart_stub", "cpu_feature_guard", "failed call to cuInit")
    loud = _native_lines("import tensorflow as tf\nimport elastimator\n" + TRAIN)
    printed = [part for part in start_up if any(part in line for line in loud)]
    quiet = _native_lines("import elastimator\nimport tensorflow as tf\n" + TRAIN)
    assert not [line for line in quiet if any(part in line for part in start_up)], (printed, quiet)
    # Without a GPU, TensorFlow prints cudart_stub's line on any CPU; elastimator held it back above.
    assert printed or not _no_gpu(), loud
    # The first session's line about the MLIR pass TensorFlow leaves off: printed where TensorFlow came first.
    assert not [line for line in quiet if "MLIR V1 optimization pass" in line], quiet


def test_a_canned_estimator_under_compat_prints_nothing_about_calls_the_user_never_made(tmp_path):
    """A DNNClassifier run by `python -m elastimator.compat`: no deprecation warning raised from elastimator's
    own layers, and no native line from the first session (the MLIR pass TensorFlow leaves off)."""
    script = tmp_path / "canned.py"
    script.write_text(
        "import numpy as np\nimport tensorflow as tf\n"
        "x = np.random.RandomState(0).normal(size=(64, 2)).astype('float32')\n"
        "y = (x[:, 0] > 0).astype('int64')\n"
        "classifier = tf.estimator.DNNClassifier([4, 4], [tf.feature_column.numeric_column('x', shape=[2])],\n"
        "                                        dropout=0.1, batch_norm=True)\n"
        "classifier.train(tf.compat.v1.estimator.inputs.numpy_input_fn({'x': x}, y, shuffle=True), steps=3)\n"
        "print('trained')\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # TensorFlow's own default
    result = subprocess.run([sys.executable, "-m", "elastimator.compat", str(script)], capture_output=True,
                            text=True, timeout=300, env=env)
    assert result.returncode == 0 and "trained" in result.stdout, result.stderr[-3000:]
    # TensorFlow's own notices about the user's calls (numeric_column is deprecated) stay, as 2.15 printed them.
    assert "tf.layers" not in result.stderr and "elastimator/" not in result.stderr, result.stderr
    assert "MLIR V1 optimization pass" not in result.stderr, result.stderr


KERAS_PACKAGES = "sorted(m for m in ('keras', 'tf_keras') if m in sys.modules)"
PLAIN_MODEL_FN = ("def model_fn(features, labels, mode):\n"
                  "    w = tf.compat.v1.get_variable('w', [1])\n"
                  "    if mode == est.ModeKeys.PREDICT:\n"
                  "        return est.EstimatorSpec(mode, predictions={'y': features['x'] * w})\n"
                  "    loss = tf.reduce_mean(tf.square(features['x'] * w - tf.cast(labels, tf.float32)))\n"
                  "    op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(\n"
                  "        loss, tf.compat.v1.train.get_global_step())\n"
                  f"    print('keras when the model is built:', {KERAS_PACKAGES}, flush=True)\n"
                  "    return est.EstimatorSpec(mode, loss=loss, train_op=op)\n")


def test_compat_leaves_keras_for_the_scripts_first_use(tmp_path):
    """`python -m elastimator.compat` runs a tf.estimator script without loading Keras (60 to 150 MB) until the
    script touches tf.keras, and tf.keras.estimator is elastimator's then."""
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\nimport numpy as np\nimport tensorflow as tf\nest = tf.estimator\n" + PLAIN_MODEL_FN
        + "x = np.ones((8, 1), np.float32)\n"
        "import tensorflow.compat.v1 as tf1  # a module object of its own, made by this import\n"
        "tf.estimator.Estimator(model_fn).train(\n"
        "    tf1.estimator.inputs.numpy_input_fn({'x': x}, x, shuffle=False), steps=2)\n"
        f"print('keras after training:', {KERAS_PACKAGES})\n"
        "print('tf.keras.estimator:', tf.keras.estimator.model_to_estimator.__module__)\n")
    result = subprocess.run([sys.executable, "-m", "elastimator.compat", str(script)], capture_output=True,
                            text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "keras when the model is built: []" in result.stdout
    assert "keras after training: []" in result.stdout
    assert "tf.keras.estimator: elastimator.keras.model_to_estimator" in result.stdout


def test_run_leaves_keras_for_the_models_first_use(tmp_path):
    """`elastimator run` of a conf whose model_fn uses no Keras layers never loads Keras."""
    (tmp_path / "train.csv").write_text("x,y\n" + "".join(f"{i / 10},{i % 2}\n" for i in range(20)))
    conf = tmp_path / "plain_conf.py"
    conf.write_text(
        "import os\nimport sys\nimport tensorflow as tf\nimport elastimator as est\n"
        "from elastimator import Column, FileReader\n"
        + PLAIN_MODEL_FN
        + "HERE = os.path.dirname(os.path.abspath(__file__))\n"
        "COLUMNS = [Column.create('x', 'float32'), Column.create('y', 'int', is_label=True)]\n"
        "class PlainConf:\n"
        "    classifier_class = model_fn\n"
        "    model_dir = os.path.join(HERE, 'model')\n"
        "    max_steps = 5\n"
        "    batch_size = 4\n"
        "    train_set = {'reader': FileReader(os.path.join(HERE, 'train.csv'), skip_header=True),\n"
        "                 'columns': COLUMNS, 'epoch': None}\n")
    result = subprocess.run([CLI, "run", f"{conf}:PlainConf", "--no-progress"], capture_output=True, text=True,
                            timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "keras when the model is built: []" in result.stdout
