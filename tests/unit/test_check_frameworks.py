"""`elastimator check` follows names through what modules bind (assignments, another module's names, relative
imports), and over the frameworks built on tf.estimator that scripts/test.sh installs it lists every use and
finds none unserved that tf.estimator 2.15 had."""

import importlib.util
import textwrap

import pytest

from elastimator.migrate import check

FRAMEWORKS = ("adanet", "neural_structured_learning", "tensorflow_lattice", "deepctr", "easy_rec",
              "tensorflow_ranking", "tensorflow_gan", "mesh_tensorflow")


def _package(tmp_path, files: dict[str, str]) -> str:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return str(tmp_path / "framework")


def _names(uses, file):
    return {(use.line, use.name, use.served) for use in uses if use.path.endswith(file)}


def test_names_are_followed_through_assignments_other_modules_and_relative_imports(tmp_path):
    root = _package(tmp_path, {
        "framework/__init__.py": "",
        "framework/tf_compat/__init__.py": """\
            import tensorflow as tf
            v1 = tf.compat.v1
            """,
        "framework/core.py": """\
            from framework import tf_compat
            spec = tf_compat.v1.estimator.tpu.TPUEstimatorSpec
            """,
        "framework/sub/__init__.py": "",
        "framework/sub/relative.py": """\
            from .. import tf_compat
            from ..tf_compat import v1
            estimator = tf_compat.v1.estimator.Estimator
            config = v1.estimator.RunConfig
            """,
        "framework/assigned.py": """\
            import tensorflow as tf
            if tf.__version__ >= "2":
                tf = tf.compat.v1
            inputs = tf.estimator.inputs.numpy_input_fn
            tf_estimator = tf.estimator
            missing = tf_estimator.NotAnEstimatorName
            """,
    })
    uses = check.check_paths([root])
    assert _names(uses, "core.py") == {(2, "tf.compat.v1.estimator.tpu.TPUEstimatorSpec", True)}
    assert _names(uses, "relative.py") == {(3, "tf.compat.v1.estimator.Estimator", True),
                                           (4, "tf.compat.v1.estimator.RunConfig", True)}
    # `tf` is tf.compat.v1 after the assignment: its estimator has `inputs`, as 2.15's v1 API had.
    assert _names(uses, "assigned.py") == {(4, "tf.compat.v1.estimator.inputs.numpy_input_fn", True),
                                           (5, "tf.compat.v1.estimator", True),
                                           (6, "tf.compat.v1.estimator.NotAnEstimatorName", False)}
    # Checked alone, a file still reads its own assignments; another module's names need that module beside it.
    assert {u.name for u in check.check_file(str(tmp_path / "framework" / "assigned.py"))} == {
        "tf.compat.v1.estimator.inputs.numpy_input_fn", "tf.compat.v1.estimator",
        "tf.compat.v1.estimator.NotAnEstimatorName"}
    assert check.check_file(str(tmp_path / "framework" / "core.py")) == []


@pytest.mark.parametrize("package", FRAMEWORKS)
def test_every_framework_uses_only_what_elastimator_serves(package):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (scripts/test.sh installs it)")
    uses = check.check_paths([package])
    assert uses, package
    assert [use.describe() for use in uses if use.missing] == []
    for use in uses:  # every use says plainly what it is
        assert use.describe().split(": ", 1)[1].split(" (")[0] == use.name
        assert any(status in use.describe() for status in ("served", "NOT SERVED", "not in tf.estimator 2.15"))


def test_tf_lattice_and_adanet_uses_are_listed_through_their_import_spellings():
    for package in ("tensorflow_lattice", "adanet"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (scripts/test.sh installs it)")
    lattice = {use.name for use in check.check_paths(["tensorflow_lattice"])}
    assert {"tensorflow_estimator.python.estimator.estimator.maybe_overwrite_model_dir_and_session_config",
            "tensorflow_estimator.python.estimator.canned.optimizers.get_optimizer_instance_v2",
            "tensorflow_estimator.python.estimator.estimator.EstimatorV2"} <= lattice
    adanet = [use for use in check.check_paths(["adanet"]) if use.path.endswith("core/tpu_estimator.py")]
    # `tf_compat.v1.estimator.tpu.TPUEstimator`, through adanet/tf_compat's `v1 = tf.compat.v1`
    assert {"tf.compat.v1.estimator.tpu.TPUEstimator", "tf.compat.v1.estimator.tpu.RunConfig",
            "tf.compat.v1.estimator.tpu.TPUEstimatorSpec"} <= {use.name for use in adanet}
