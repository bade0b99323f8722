"""A Python program that imports elastimator and then configures logging sees each TensorFlow line once (it saw
them twice: TensorFlow's own handler and the root logger's), and no TensorFlow deprecation notice about a call
inside elastimator (the user cannot act on it)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = """
import logging, os
import elastimator, tensorflow as tf
elastimator.Estimator  # a program uses the library (its names load TensorFlow on first use)
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
tf.compat.v1.logging.info("a line of TensorFlow's")
package = os.path.dirname(elastimator.__file__)
tf.get_logger().warning("From %s: %s (from %s) is deprecated.", os.path.join(package, "premade", "dnn.py") + ":9",
                        "dense", "tf.layers")
tf.get_logger().warning("From %s: %s (from %s) is deprecated.", "/home/user/model.py:3", "dense", "tf.layers")
"""


def test_each_tensorflow_line_once_and_no_notice_about_elastimators_own_calls():
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stderr.count("a line of TensorFlow's") == 1
    assert "premade/dnn.py" not in run.stderr  # elastimator's own call
    assert run.stderr.count("/home/user/model.py:3") == 1  # the user's call: theirs to change
