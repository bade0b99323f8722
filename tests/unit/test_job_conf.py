"""Job conf validation: every message names the key, what was expected and what was received."""

import os
import re

import pytest

import elastimator as est
from elastimator import Column, ConfError, FileReader
from elastimator.job.conf import DATASET_KEYS, ExporterConf, JobConf, load_conf
from tests.helpers import linear_model_fn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS = (Column.create("x", "float32"), Column.create("y", "int", is_label=True))


def _conf(**overrides):
    conf = {"classifier_class": linear_model_fn,
            "train_set": {"reader": FileReader("train.csv"), "columns": COLUMNS}}
    conf.update(overrides)
    return conf


def test_a_minimal_conf_gets_the_documented_defaults():
    conf = JobConf.from_object(_conf(batch_size=64))
    assert conf.train_set.batch_size == 64 and conf.train_set.epoch == 1 and conf.eval_set is None
    assert conf.keep_checkpoint_max == 5 and conf.log_steps == 100
    assert conf.exporter == ExporterConf(type="final")


@pytest.mark.parametrize("overrides, message", [
    ({"max_step": 100}, r"unknown key\(s\) 'max_step' \(did you mean 'max_steps'\?\)"),
    ({"max_steps": "1000"}, r"'max_steps' expected int >= 1 or None; got str '1000'"),
    ({"save_steps": 10, "save_secs": 60}, "save_steps .* and save_secs .* are exclusive"),
    ({"keep_checkpoint_max": -1}, "'keep_checkpoint_max' expected int >= 0"),
    ({"params": [1, 2]}, "'params' expected a dict; got list"),
    ({"classifier_class": 42}, "'classifier_class' expected a model_fn or an Estimator subclass"),
    ({"classifier_class": dict}, "not an elastimator.Estimator subclass"),
    ({"exporter": "biggest"}, r"exporter type expected one of \('final', 'latest', 'best'\); got 'biggest'"),
    ({"exporter": {"type": "best", "compare": None}}, r"exporter has unknown key\(s\) \['compare'\]"),
    ({"exporter": {"type": "best", "compare_fn": lambda a, b: True}}, "compare_fn must take exactly two arguments"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS, "batchsize": 3}},
     r"train_set has unknown key\(s\) \['batchsize'\]"),
    ({"train_set": {"columns": COLUMNS}}, "train_set needs 'reader' \\(or 'path'\\) and 'columns'"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS, "epoch": 0}},
     "train_set: 'epoch' expected int > 0; got 0"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS[:1]}}, "train_set: no label column"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS, "max_bad_records": -2}},
     "'max_bad_records' expected int >= 0"),
    ({"eval_set": {"reader": FileReader("a"), "columns": (Column.create("x", "float64"), COLUMNS[1])}},
     "eval_set columns differ from train_set columns"),
])
def test_invalid_confs_are_rejected_with_the_key_named(overrides, message):
    with pytest.raises(ConfError, match=message):
        JobConf.from_object(_conf(**overrides))


def test_required_keys():
    with pytest.raises(ConfError, match="'train_set' is required"):
        JobConf.from_object({"classifier_class": linear_model_fn})


def test_class_and_module_confs_ignore_imports_functions_and_privates(tmp_path):
    path = tmp_path / "my_conf.py"
    path.write_text(
        "import os\n"
        "from elastimator import Column, FileReader\n"
        "from tests.helpers import linear_model_fn\n"
        "_private = 1\n"
        "def helper():\n    return 1\n"
        "classifier_class = linear_model_fn\n"
        "max_steps = 7\n"
        "train_set = {'path': 'train.csv', 'skip_header': True,\n"
        "             'columns': (Column.create('x', 'float32'), Column.create('y', 'int', is_label=True))}\n"
        "class Conf:\n"
        "    classifier_class = linear_model_fn\n"
        "    train_set = train_set\n"
        "    max_steps = 9\n"
    )
    module_conf = load_conf(str(path))
    assert module_conf.max_steps == 7 and module_conf.name == "my_conf"
    assert module_conf.train_set.reader.skip_header is True
    assert load_conf(f"{path}:Conf").max_steps == 9


def test_conf_import_errors_are_reported_once(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(ConfError, match="failed to import: ModuleNotFoundError"):
        load_conf(str(broken))
    with pytest.raises(ConfError, match="conf file 'missing.py' does not exist"):
        load_conf("missing.py")
    with pytest.raises(ConfError, match="not found. Expected 'package.module.ConfClass'"):
        load_conf("tests.helpers.NoSuchConf")


def test_estimator_subclass_as_classifier_class():
    class Adaptor(est.Estimator):
        def model_fn(self, features, labels, mode, params):
            return linear_model_fn(features, labels, mode, params)

    assert JobConf.from_object(_conf(classifier_class=Adaptor)).classifier_class is Adaptor

    class NoModelFn(est.Estimator):
        pass

    with pytest.raises(ConfError, match="defines no model_fn method"):
        JobConf.from_object(_conf(classifier_class=NoModelFn))


def test_every_key_is_documented_in_the_reference_page():
    page = open(os.path.join(ROOT, "docs", "conf-reference.md")).read()
    documented = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.M))
    job_keys = {f for f in JobConf.__dataclass_fields__ if f != "name"}
    exporter_keys = set(ExporterConf.__dataclass_fields__)
    assert job_keys | set(DATASET_KEYS) | exporter_keys <= documented
