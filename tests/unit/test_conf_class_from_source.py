"""A conf class its file does not define is answered from the file's source (ast) before TensorFlow loads, as a
missing conf file is; a conf whose names its source cannot tell is imported as before."""

import os
import subprocess
import sys
import textwrap

import pytest

from elastimator.job.conf_source import missing_conf_class

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CENSUS = os.path.join("examples", "census", "census_conf.py")


def _without_tensorflow(tmp_path):
    """An environment where importing TensorFlow fails loudly: a `tensorflow` package that raises, first on the
    path."""
    fake = tmp_path / "no-tf" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("TEST: TensorFlow was imported")\n')
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), os.path.join(ROOT, "src")]))


@pytest.mark.parametrize("command", ["run", "export", "launch"])
def test_a_misspelt_conf_class_is_answered_without_tensorflow(tmp_path, command):
    result = subprocess.run([sys.executable, "-m", "elastimator.cli", command, f"{CENSUS}:CensusConff"],
                            capture_output=True, text=True, cwd=ROOT, env=_without_tensorflow(tmp_path), timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"elastimator: error: conf file {CENSUS!r} has no 'CensusConff'; it defines the conf "
                             f"class(es) CensusConf. Did you mean {CENSUS}:CensusConf?\n")


def _conf(tmp_path, source: str) -> str:
    path = tmp_path / "conf.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_names_the_source_binds_in_any_way_are_not_refused(tmp_path):
    bound = {
        "a class in a branch": "import os\nif os.sep:\n    class Conf:\n        classifier_class = print\n",
        "an import": "from somewhere import Conf\n",
        "a function's global": "def make():\n    global Conf\n    Conf = 1\nmake()\n",
        "an assignment": "Conf = type('Conf', (), {})\n",
    }
    for why, source in bound.items():
        assert missing_conf_class(f"{_conf(tmp_path, source)}:Conf") is None, why
    unknowable = {
        "a star import": "from somewhere import *\n",
        "globals()": "globals()['Conf'] = 1\n",
        "a module __getattr__": "def __getattr__(name):\n    return 1\n",
        "sys.modules": "import sys\nsetup = sys.modules[__name__]\n",
    }
    for why, source in unknowable.items():
        assert missing_conf_class(f"{_conf(tmp_path, source)}:Conf") is None, why


def test_the_conf_classes_named_are_those_that_set_classifier_class(tmp_path):
    path = _conf(tmp_path, """
        class Base:
            classifier_class = print
        class Census(Base):
            max_steps = 10
        class Helper:
            pass
    """)
    assert missing_conf_class(f"{path}:Censsu") == (f"conf file {path!r} has no 'Censsu'; it defines the conf "
                                                    f"class(es) Base, Census. Did you mean {path}:Census?")
    assert missing_conf_class(f"{path}:Census") is None and missing_conf_class(path) is None
