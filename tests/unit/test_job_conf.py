"""Job conf validation: every message names the key, what was expected and what was received."""

import os
import re

import pytest
import tensorflow as tf

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
    ({"max_steps": "1000"}, r"'max_steps' expected int >= 1 or None; got str '1000'\. Set it as a plain int in the "
                            r"conf, e\.g\. max_steps = 1000 \(or None\)\."),
    ({"save_steps": 10, "save_secs": 60}, "save_steps .* and save_secs .* are exclusive"),
    ({"keep_checkpoint_max": -1}, "'keep_checkpoint_max' expected int >= 0"),
    ({"params": [1, 2]}, "'params' expected a dict; got list"),
    ({"classifier_class": 42}, "'classifier_class' expected a model_fn or an Estimator subclass"),
    ({"classifier_class": dict}, r"not an elastimator.Estimator \(tf.estimator.Estimator\) subclass"),
    ({"exporter": "biggest"}, r"exporter type expected one of \('final', 'latest', 'best'\); got 'biggest'"),
    ({"exporter": {"type": "best", "compare": None}}, r"exporter has unknown key\(s\) \['compare'\]"),
    ({"exporter": {"type": "best", "compare_fn": lambda a, b: True}}, "compare_fn must take exactly two arguments"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS, "batchsize": 3}},
     r"train_set: unknown key\(s\) 'batchsize' \(did you mean 'batch_size'\?\)"),
    ({"max_stpes": 100}, r"unknown key\(s\) 'max_stpes' \(did you mean 'max_steps'\?\)"),
    ({"save_step": 100}, r"unknown key\(s\) 'save_step' \(did you mean 'save_steps'\?\)"),
    ({"epoch": 0}, r"'epoch' expected int >= 1 or None; got int 0"),
    ({"train_set": {"columns": COLUMNS}}, "train_set needs 'reader' \\(or 'path'\\) and 'columns'"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS, "epoch": 0}},
     "train_set: 'epoch' expected int > 0; got 0"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS[:1]}}, "train_set: no label column"),
    ({"train_set": {"reader": FileReader("a"), "columns": COLUMNS, "max_bad_records": -2}},
     "'max_bad_records' expected int >= 0"),
    ({"eval_set": {"reader": FileReader("a"), "columns": (Column.create("x", "float64"), COLUMNS[1])}},
     "eval_set columns differ from train_set columns"),
    ({"strategy": "mirored"},
     r"'strategy' expected one of \['parameter_server', 'mirrored', 'multi_worker_mirrored'\]; got 'mirored'"),
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
    with pytest.raises(ConfError, match="conf module 'tests.helpers' has no 'NoSuchConf'; it defines no conf class"):
        load_conf("tests.helpers.NoSuchConf")
    with pytest.raises(ConfError, match="not found. Expected 'package.module.ConfClass'"):
        load_conf("NoSuchConf")


def test_estimator_subclass_as_classifier_class():
    class Adaptor(est.Estimator):
        def model_fn(self, features, labels, mode, params):
            return linear_model_fn(features, labels, mode, params)

    assert JobConf.from_object(_conf(classifier_class=Adaptor)).classifier_class is Adaptor

    class PassesAFunction(est.Estimator):  # DLRover's pattern: a module-level model_fn handed to __init__
        def __init__(self, model_dir, config=None, params=None):
            super().__init__(linear_model_fn, model_dir=model_dir, config=config, params=params)

    assert JobConf.from_object(_conf(classifier_class=PassesAFunction)).classifier_class is PassesAFunction


def test_keys_that_are_not_elastimators_are_the_users_and_listed_once(caplog):
    caplog.set_level("INFO", logger="elastimator")
    conf = JobConf.from_object(_conf(col=list(COLUMNS), dense_features=["x"], learning_rate=0.1,
                                     train_set={"reader": FileReader("a"), "columns": COLUMNS, "reader_fn": None}))
    assert conf.user_keys == ("col", "dense_features", "learning_rate")
    messages = [r.getMessage() for r in caplog.records]
    assert "conf: keys elastimator does not use, left to your code: col, dense_features, learning_rate." in messages
    assert "conf: train_set: keys elastimator does not use, left to your code: reader_fn." in messages


def test_top_level_epoch_and_batch_size_are_defaults_the_data_sets_override():
    conf = JobConf.from_object(_conf(epoch=3, batch_size=7,
                                     eval_set={"reader": FileReader("e"), "columns": COLUMNS, "batch_size": 2}))
    assert (conf.train_set.epoch, conf.train_set.batch_size) == (3, 7)
    assert (conf.eval_set.epoch, conf.eval_set.batch_size) == (1, 2)  # evaluation reads its set once
    own = JobConf.from_object(_conf(epoch=3, train_set={"reader": FileReader("a"), "columns": COLUMNS, "epoch": 10}))
    assert own.train_set.epoch == 10


def test_every_key_is_documented_in_the_reference_page():
    page = open(os.path.join(ROOT, "docs", "conf-reference.md")).read()
    documented = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.M))
    job_keys = {f for f in JobConf.__dataclass_fields__ if f not in ("name", "user_keys")}
    exporter_keys = set(ExporterConf.__dataclass_fields__)
    assert job_keys | set(DATASET_KEYS) | exporter_keys <= documented


def test_a_mirrored_conf_trains_and_evaluates_with_a_mirrored_strategy_alone_and_not_in_a_cluster():
    from elastimator.job.executor import run_config  # pylint: disable=import-outside-toplevel

    assert run_config(JobConf.from_object(_conf())).train_distribute is None
    config = run_config(JobConf.from_object(_conf(strategy="mirrored")), tf_config={})
    assert type(config.train_distribute).__name__ == "MirroredStrategy"
    assert config.eval_distribute is config.train_distribute
    cluster = {"cluster": {"chief": ["localhost:2222"], "ps": ["localhost:2223"]}, "task": {"type": "chief", "index": 0}}
    with pytest.raises(ConfError, match="strategy 'mirrored' trains in one process.*one task of a cluster"):
        run_config(JobConf.from_object(_conf(strategy="mirrored")), tf_config=cluster)


def test_replicas_per_worker_is_for_synchronous_strategies_and_a_started_runtime_with_fewer_devices_is_named():
    from elastimator.job import devices  # pylint: disable=import-outside-toplevel

    with pytest.raises(ConfError, match="'replicas_per_worker' is 2, and strategy 'parameter_server' trains one "
                                        "replica per process"):
        JobConf.from_object(_conf(replicas_per_worker=2))
    with pytest.raises(ConfError, match="'replicas_per_worker' expected int >= 1 or None; got int 0"):
        JobConf.from_object(_conf(strategy="multi_worker_mirrored", replicas_per_worker=0))
    assert JobConf.from_object(_conf(strategy="mirrored", replicas_per_worker=2)).replicas_per_worker == 2
    assert devices.local_devices(None) is None
    tf.config.list_logical_devices()  # this process's runtime has started, with its one CPU
    assert devices.local_devices(1) == ("CPU:0",)
    with pytest.raises(ConfError, match="needs as many logical CPU devices, and TensorFlow's runtime already "
                                        "started with 1.*at most 1"):
        devices.local_devices(2)


def test_a_synchronous_conf_refuses_parameter_servers_and_leaves_its_evaluator_on_one_device():
    from elastimator.job.executor import run_config  # pylint: disable=import-outside-toplevel

    conf = JobConf.from_object(_conf(strategy="multi_worker_mirrored"))
    with_ps = {"cluster": {"chief": ["localhost:2222"], "ps": ["localhost:2223"]}, "task": {"type": "chief", "index": 0}}
    with pytest.raises(ConfError, match="'multi_worker_mirrored' all-reduces among the chief and workers and has no "
                                        "parameter servers, but TF_CONFIG's cluster lists \"ps\" tasks"):
        run_config(conf, tf_config=with_ps)
    evaluator = {"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2224"]},
                 "task": {"type": "evaluator", "index": 0}}
    assert run_config(conf, tf_config=evaluator).train_distribute is None
    without_ps = dict(evaluator, task={"type": "worker", "index": 0})
    with pytest.raises(ConfError, match="strategy 'parameter_server'.*has workers and no \"ps\" tasks: each worker "
                                        "would train a model of its own"):
        run_config(JobConf.from_object(_conf()), tf_config=without_ps)
