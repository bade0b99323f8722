"""The command line for a newcomer: `elastimator` alone lists the commands, --verbose goes before or after the
command, a conf file that defines conf classes says which to name, and a path that names nothing is bad usage
(exit 2), as the README's table says."""

import os

import pytest

from elastimator import cli
from elastimator.errors import ConfError
from elastimator.job.conf import load_conf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_elastimator_alone_lists_every_command_and_exits_2(capsys):
    assert cli.main([]) == 2
    listed = capsys.readouterr().err
    for command in ("run", "export", "predict", "inspect", "report", "shard-service", "launch", "scale", "k8s",
                    "check"):
        assert f"    {command}" in listed, command


@pytest.mark.parametrize("argv, verbose", [
    (["run", "conf.py"], False),
    (["--verbose", "run", "conf.py"], True),
    (["run", "--verbose", "conf.py"], True),
    (["run", "conf.py", "-v"], True),
    (["-v", "inspect", "model_dir"], True),
])
def test_verbose_is_taken_before_or_after_the_command(argv, verbose):
    assert cli._parser().parse_args(argv).verbose is verbose  # pylint: disable=protected-access


def test_a_conf_file_that_only_defines_conf_classes_names_them():
    path = os.path.join(ROOT, "examples", "census", "census_conf.py")
    with pytest.raises(ConfError, match=r"sets no 'classifier_class' itself; it defines the conf class\(es\) "
                                        r"CensusConf\. Name one: .*census_conf\.py:CensusConf\."):
        load_conf(path)


def test_a_conf_class_that_is_not_there_lists_the_ones_that_are():
    path = os.path.join(ROOT, "examples", "census", "census_conf.py")
    with pytest.raises(ConfError, match=r"census_conf\.py' has no 'Nope'; it defines the conf class\(es\) "
                                        r"CensusConf\."):
        load_conf(f"{path}:Nope")


def test_k8s_help_names_both_apis(capsys):
    with pytest.raises(SystemExit):
        cli._parser().parse_args(["k8s", "--help"])  # pylint: disable=protected-access
    out = capsys.readouterr().out
    assert "JobSet" in out and "TFJob" in out


def test_paths_that_name_nothing_are_bad_usage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the conf imports tests.helpers
    assert cli.main(["run", str(tmp_path / "nope.py")]) == 2
    assert "conf file" in capsys.readouterr().err
    conf = tmp_path / "conf.py"
    conf.write_text(
        "import elastimator as est\n"
        "from tests.helpers import linear_model_fn\n"
        "classifier_class = linear_model_fn\n"
        f"train_set = {{'reader': est.FileReader({str(tmp_path / 'missing.csv')!r}),\n"
        "             'columns': [est.Column.create('x', 'float32'), est.Column.create('y', 'int', is_label=True)]}\n")
    assert cli.main(["run", "--no-progress", str(conf), "--model-dir", str(tmp_path / "model")]) == 2
    assert "no file matches" in capsys.readouterr().err
    assert cli.main(["predict", "--saved-model", str(tmp_path / "census_modle"), "--input", str(conf)]) == 2
    said = capsys.readouterr().err
    assert "--saved-model" in said and "census_modle" in said and "does not exist" in said


def test_a_mistyped_path_is_answered_before_tensorflow_loads(tmp_path):
    """`run nope.py` and friends answered in the time TensorFlow takes to load (7 s here) was the newcomer's
    first wait: the paths are checked first, in a process that then has not imported TensorFlow."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    program = ("import sys\nfrom elastimator import cli\n"
               "codes = [cli.main(a) for a in ([\"run\", \"nope.py\"], [\"export\", \"nope.py:Conf\"],"
               " [\"inspect\", \"no_model\"], [\"report\", \"no_model\"],"
               " [\"predict\", \"--saved-model\", \"census_modle\", \"--input\", \"x.csv\"])]\n"
               "print(codes, 'tensorflow' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT])))
    assert run.stdout.strip() == "[2, 2, 2, 2, 2] False", run.stderr[-2000:]
    for said in ("conf file 'nope.py' does not exist", "model_dir 'no_model' does not exist",
                 "--saved-model 'census_modle' does not exist"):
        assert said in run.stderr


def test_verbose_shows_the_traceback_of_elastimators_own_errors_too(tmp_path, capsys):
    """The README promises the traceback with --verbose; for elastimator's own errors it printed the same line."""
    missing = str(tmp_path / "nowhere")
    assert cli.main(["inspect", missing]) == 2
    plain = capsys.readouterr().err
    assert "Traceback" not in plain and f"model_dir {missing!r} does not exist" in plain
    assert cli.main(["--verbose", "inspect", missing]) == 2
    verbose = capsys.readouterr().err
    assert "Traceback (most recent call last)" in verbose and "MissingPathError" in verbose
    assert verbose.rstrip().endswith(plain.strip().splitlines()[-1])
