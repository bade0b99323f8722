"""Which TensorFlow elastimator accepts (the quiet, TensorFlow-free start is in
tests/integration/test_quiet_start.py)."""

import pytest

from elastimator.tensorflow_import import UnsupportedTensorFlowError, check_single_build, check_version



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
