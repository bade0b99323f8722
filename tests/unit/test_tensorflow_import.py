"""Which TensorFlow elastimator accepts, and the command line's quiet, TensorFlow-free start."""

import os
import subprocess
import sys

import pytest

from elastimator.tensorflow_import import UnsupportedTensorFlowError, check_single_build, check_version

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(os.path.dirname(sys.executable), "elastimator")


@pytest.mark.parametrize("version", ["2.16.0", "2.17.1", "2.21.0", "2.18.0rc2"])
def test_every_release_since_the_removal_of_tf_estimator_is_accepted(version):
    check_version(version)


def test_an_older_tensorflow_is_refused_with_what_to_install():
    with pytest.raises(UnsupportedTensorFlowError, match=r"2\.16 or newer; this environment has 2\.15\.1.*pip install"):
        check_version("2.15.1")


def test_two_builds_of_different_versions_over_each_other_are_refused():
    check_single_build({"tensorflow": "2.21.0", "tensorflow-cpu": "2.21.0"})  # same files twice: fine
    with pytest.raises(UnsupportedTensorFlowError, match="tensorflow 2.21.0, tensorflow-cpu 2.17.1"):
        check_single_build({"tensorflow": "2.21.0", "tensorflow-cpu": "2.17.1"})


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
