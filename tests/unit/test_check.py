"""`elastimator check PATH`: every use of tf.estimator's API in a source tree, read (never imported), against the
table `elastimator.compat` serves; and that table against what compat really serves."""

import inspect
import os
import subprocess
import sys
import textwrap

import pytest

from elastimator import cli
from elastimator.migrate import check, surface

PROGRAM = textwrap.dedent('''
    import tensorflow.compat.v1 as tf
    import tensorflow_estimator as tfe
    from tensorflow import estimator as tf_estimator
    from tensorflow.python.estimator import gc
    from tensorflow.python.estimator.training import _TrainingExecutor, _not_a_real_name
    from tensorflow_estimator.python.estimator import util as estimator_util
    from tensorflow_estimator.python.estimator.canned.head import _regression_head
    from tensorflow.python.distribute import estimator_training

    class Ranker(tf.estimator.Estimator):
        def _call_model_fn(self, features, labels, mode, config):
            return super()._call_model_fn(features, labels, mode, config)

        def _train_model(self, input_fn, hooks, saving_listeners):
            pass

    def build(estimator, input_fn):
        spec = tf.estimator.tpu.TPUEstimatorSpec
        estimator._create_and_assert_global_step(None)
        estimator_util.parse_input_fn_result(input_fn())
        keep = gc._largest_export_versions(5)
        inputs = tf_estimator.inputs.numpy_input_fn
        return tfe.estimator.export.PredictOutput, tf_estimator.BoostedTreesClassifier
''')


def _uses(tmp_path, source=PROGRAM):
    path = tmp_path / "program.py"
    path.write_text(source)
    return {use.name: use for use in check.check_paths([str(path)])}


def test_each_use_is_found_with_its_line_and_whether_it_is_served(tmp_path):
    uses = _uses(tmp_path)
    served = {name for name, use in uses.items() if use.served}
    missing = {name for name, use in uses.items() if use.missing}
    assert {"tf.compat.v1.estimator.Estimator", "tf.compat.v1.estimator.tpu.TPUEstimatorSpec",
            "tensorflow_estimator.python.estimator.gc", "tensorflow_estimator.python.estimator.training._TrainingExecutor",
            "tensorflow_estimator.python.estimator.util", "Estimator._call_model_fn",
            "Estimator._create_and_assert_global_step", "tf.estimator.export.PredictOutput",
            "tensorflow_estimator.python.estimator.util.parse_input_fn_result",
            "tensorflow_estimator.python.estimator.gc._largest_export_versions",
            "tensorflow.python.distribute.estimator_training"} <= served
    assert missing == {"tensorflow_estimator.python.estimator.training._not_a_real_name",
                       "tensorflow_estimator.python.estimator.canned.head._regression_head",
                       "Estimator._train_model"}
    notes = {(use.line, use.note) for use in check.check_paths([str(tmp_path / "program.py")])
             if use.name == "Estimator._call_model_fn"}
    assert notes == {(12, "overridden: elastimator calls it where 2.15 did"), (13, "")}
    assert "training loop" in uses["Estimator._train_model"].note
    assert uses["tf.compat.v1.estimator.Estimator"].line == 11
    # TensorFlow 1's names, which 2.15 lacked too: listed, not counted as unserved.
    for name in ("tf.estimator.inputs", "tf.estimator.BoostedTreesClassifier"):
        assert not uses[name].served and not uses[name].in_215 and not uses[name].missing, name


def test_a_private_member_on_something_else_is_not_an_estimators(tmp_path):
    uses = _uses(tmp_path, textwrap.dedent('''
        import tensorflow as tf

        class Helper:
            def _train_model(self, directory):
                self._config = directory

        def run(helper):
            helper._train_model("x")
            return tf.estimator.Estimator
    '''))
    assert set(uses) == {"tf.estimator.Estimator"}


def test_the_command_exits_0_only_when_everything_is_served(tmp_path, capsys):
    assert cli.main(["check", str(tmp_path / "missing")]) == 2
    (tmp_path / "ok.py").write_text("import tensorflow as tf\nmodel = tf.estimator.DNNClassifier\n")
    assert cli.main(["check", str(tmp_path / "ok.py")]) == 0
    assert "ok.py:2: tf.estimator.DNNClassifier (public): served" in capsys.readouterr().out
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "program.py").write_text(PROGRAM)
    assert cli.main(["check", "--unserved", str(tmp_path / "tree")]) == 1
    out = capsys.readouterr().out
    assert "_regression_head (private module): NOT SERVED" in out and ": served" not in out
    assert "3 not served: Estimator._train_model, " in out.splitlines()[-1]
    assert cli.main(["check", "--by-name", str(tmp_path / "tree"), str(tmp_path / "ok.py")]) == 1
    assert "   1  Estimator._train_model (Estimator member): not served" in capsys.readouterr().out


def test_check_reads_an_installed_package_without_loading_tensorflow(tmp_path):
    package = tmp_path / "framework"
    package.mkdir()
    (package / "__init__.py").write_text("import tensorflow as tf\nSPEC = tf.estimator.EstimatorSpec\n")
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from elastimator import cli; code = cli.main(['check', 'framework']); "
                               "print('tensorflow' in sys.modules); sys.exit(code)"],
        capture_output=True, text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path)), timeout=120)
    assert run.returncode == 0, run.stderr
    assert "__init__.py:2: tf.estimator.EstimatorSpec (public): served" in run.stdout
    assert run.stdout.splitlines()[-1] == "False"


def test_the_table_is_what_compat_serves():
    import elastimator  # pylint: disable=import-outside-toplevel
    from elastimator import experimental, export, inputs, tpu  # pylint: disable=import-outside-toplevel
    from elastimator.compat import api  # pylint: disable=import-outside-toplevel

    assert set(surface.SUBMODULES["export"]) == set(export.__all__)
    assert set(surface.SUBMODULES["experimental"]) == set(experimental.__all__)
    assert set(surface.SUBMODULES["inputs"]) <= set(inputs.__all__)
    assert set(surface.SUBMODULES["tpu"]) == set(tpu.__all__)
    modules = api.private_modules()
    for path, names in surface.PRIVATE.items():
        for root in surface.PRIVATE_ROOTS:
            module = modules[f"{root}.{path}" if path else root]
            for name, served in names.items():
                assert getattr(module, name) is api.resolve(served.target), (path, name)
    for name in surface.ESTIMATOR_MEMBERS:
        assert hasattr(elastimator.Estimator, name) or name in inspect.signature(
            elastimator.Estimator.__init__).parameters or name in ("_config", "_model_dir", "_params",
                                                                   "_model_fn"), name
    for name in surface.ESTIMATOR_MEMBERS_NOT_SERVED:
        assert not hasattr(elastimator.Estimator, name), name


@pytest.mark.parametrize("path", ["tensorflow.python.estimator.training", "tensorflow_estimator.python.estimator.gc"])
def test_a_private_module_in_the_table_imports_under_compat(path):
    from elastimator import compat  # pylint: disable=import-outside-toplevel

    compat.install()
    try:
        module = __import__(path, fromlist=["_"])
        assert set(surface.PRIVATE[surface.private_module(path)]) <= set(vars(module))
    finally:
        compat.uninstall()
