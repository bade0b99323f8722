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
    for command in ("run", "export", "predict", "inspect", "report", "shard-service", "launch", "scale", "k8s"):
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
