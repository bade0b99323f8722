"""`import elastimator` without a supported TensorFlow is one ImportError there and then, found without importing
TensorFlow (its wheel's metadata says its version); the command line still answers what needs no TensorFlow."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TF215 = os.path.join(ROOT, "bench", ".venv-tf215", "bin", "python")


def _shadowing_tensorflow(tmp_path, version: str | None):
    """A directory first on sys.path whose `tensorflow` package fails loudly if imported, with (`version`) the
    metadata a wheel of that version writes beside it."""
    shadow = tmp_path / "shadow"
    (shadow / "tensorflow").mkdir(parents=True)
    (shadow / "tensorflow" / "__init__.py").write_text('raise RuntimeError("TEST: TensorFlow was imported")\n')
    if version is not None:
        info = shadow / f"tensorflow-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {version}\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow), os.path.join(ROOT, "src")]))


def _python(env, *args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_a_too_old_tensorflow_is_one_import_error_at_import(tmp_path):
    env = _shadowing_tensorflow(tmp_path, "2.15.1")
    result = _python(env, "-c", "import elastimator")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("elastimator.tensorflow_import.UnsupportedTensorFlowError: elastimator runs on "
                           "TensorFlow 2.16 or newer; this environment has 2.15.1"), result.stderr
    assert "TEST: TensorFlow was imported" not in result.stderr
    caught = _python(env, "-c", "try:\n    import elastimator\nexcept ImportError as e:\n    print('caught', e)")
    assert caught.returncode == 0 and caught.stdout.startswith("caught elastimator runs on TensorFlow 2.16")


def test_no_tensorflow_at_all_is_one_import_error_at_import(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    # -S: no site-packages (where the shared venv's TensorFlow is); the source tree alone.
    result = subprocess.run([sys.executable, "-S", "-c", "import elastimator"], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")), cwd=empty, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "elastimator.tensorflow_import.UnsupportedTensorFlowError: elastimator needs TensorFlow 2.16 to 2.21, and "
        "none is installed: pip install 'tensorflow>=2.16,<2.22' 'tf-keras>=2.16,<2.22' (tensorflow[and-cuda] "
        "for GPUs).")


def test_a_supported_or_unreadable_version_imports_without_tensorflow(tmp_path):
    for version in ("2.21.0", None):  # None: no metadata beside it (a build from source); the first use checks
        env = _shadowing_tensorflow(tmp_path / str(version), version)
        result = _python(env, "-c", "import sys, elastimator; print('tensorflow' in sys.modules)")
        assert result.returncode == 0 and result.stdout == "False\n", result.stderr


def test_the_command_line_answers_without_tensorflow_and_says_what_to_install(tmp_path):
    env = _shadowing_tensorflow(tmp_path, "2.15.1")
    assert _python(env, "-m", "elastimator.cli", "--help").returncode == 0
    checked = _python(env, "-m", "elastimator.cli", "check", "src/elastimator/cli.py")
    assert checked.returncode == 0, checked.stderr
    run = _python(env, "-m", "elastimator.cli", "inspect", ".")
    assert run.returncode == 1 and "TEST: TensorFlow was imported" not in run.stderr
    assert run.stderr.startswith("elastimator: error: UnsupportedTensorFlowError: elastimator runs on TensorFlow "
                                 "2.16 or newer; this environment has 2.15.1"), run.stderr


@pytest.mark.skipif(not os.path.exists(TF215), reason="the tf.estimator 2.15 reference venv is not here")
def test_the_real_tensorflow_2_15_is_refused_at_import():
    result = subprocess.run([TF215, "-c", "import sys, elastimator"], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")), timeout=120)
    assert result.returncode == 1
    assert "UnsupportedTensorFlowError: elastimator runs on TensorFlow 2.16 or newer; this environment has " \
           "2.15.1" in result.stderr
