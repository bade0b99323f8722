"""DLRover's own TensorFlow examples (../shared/dlrover-examples, unchanged) run on elastimator with no edit.

Each example is copied to a temporary directory and run the way DLRover's docs run it, with
`elastimator run` (or `launch`) in place of DLRover's trainer entry point. No file of the example
is changed; where a program hard-codes an absolute path (`/data/ckpts/`), the test gives it a
private mount there instead of editing it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import DLROVER_EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
SHARED = DLROVER_EXAMPLES

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not SHARED.is_dir(), reason=f"DLRover's examples are expected at {SHARED} (shared/ beside "
                                                   "the checkout, or ELASTIMATOR_SHARED)"),
]


def _example(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(SHARED / name, tmp_path / name))


def _elastimator(args, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "elastimator.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _latest_step(model_dir: Path) -> int:
    return int(tf.train.latest_checkpoint(str(model_dir)).rsplit("-", 1)[1])


def _only_export(model_dir: Path) -> Path:
    exports = [p for p in (model_dir / "export" / "final").iterdir() if p.name.isdigit()]
    assert len(exports) == 1, exports
    return exports[0]


def test_dlrovers_entry_command_runs_the_conf_behind_elastimator_compat(tmp_path):
    """The command of DLRover's job YAMLs, with `-m elastimator.compat` put in front: the conf trains as
    `elastimator run` trains it, and the flag with no counterpart is named."""
    work = _example("deepfm_tf", tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "elastimator.compat", "-m", "dlrover.trainer.entry.local_entry",
         "--platform=Kubernetes", "--conf=deepfm_conf.TrainConf", "--worker_action=run"],
        cwd=work, capture_output=True, text=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-4000:]
    assert "DLRover arguments with no counterpart here, not used: --worker_action=run" in result.stdout
    assert _latest_step(work) == 100


def test_deepfm_conf_trains_evaluates_and_exports_unedited(tmp_path):
    work = _example("deepfm_tf", tmp_path)
    result = _elastimator(["run", "deepfm_conf.py:TrainConf", "--no-progress"], cwd=work)
    assert result.returncode == 0, result.stderr[-4000:]
    # model_dir = "./": the example's directory, as DLRover's run.sh cleans it. 200 records (the header line is
    # found and skipped, not trained, not fatal), batch_size 2, epoch 1 from the conf's top-level keys.
    assert _latest_step(work) == 100
    assert re.search(r"data_kaggle_ad_ctr_train.csv is a header \(field 'I0' = 'label' is not a valid int32\)",
                     result.stderr)
    assert "keys elastimator does not use, left to your code: col, dense_col, dense_features, sparse_col, " \
           "sparse_features" in result.stderr
    assert re.search(r"^\s+AUC\s+0\.\d+", result.stdout, flags=re.M), result.stdout
    # Empty CTR fields became 0, as decode_csv's defaults made them in DLRover, and were counted per column.
    filled = re.search(r"empty fields filled \(train_set, per read\)\s+(.*)", result.stdout)
    assert filled and "I1: " in filled.group(1), result.stdout
    inspected = _elastimator(["inspect", "."], cwd=work)
    assert inspected.returncode == 0 and "empty fields filled (train_set, per read)" in inspected.stdout
    served = tf.saved_model.load(str(_only_export(work))).signatures["serving_default"]
    row = {f"I{i}": tf.constant([float(i)]) for i in range(1, 14)}
    row.update({f"C{i}": tf.constant(["05db9164"]) for i in range(1, 27)})
    outputs = served(**row)  # DeepCTR's PredictOutput: {"pred": sigmoid(logits), "logits": ...}
    prediction, logits = outputs["pred"].numpy(), outputs["logits"].numpy()
    assert prediction.shape == (1, 1) and 0 <= prediction[0, 0] <= 1
    np.testing.assert_allclose(prediction, 1 / (1 + np.exp(-logits)), rtol=1e-5)


def test_estimator_executor_conf_with_a_custom_reader_and_a_variable_named_like_a_column(tmp_path):
    work = _example("estimator_executor", tmp_path)
    model_dir = tmp_path / "model"  # the conf says /nas
    result = _elastimator(["run", "conf.py:TrainConf", "--model-dir", str(model_dir), "--no-progress"], cwd=work)
    assert result.returncode == 0, result.stderr[-4000:]
    # FakeReader: 10 records, train_set's own epoch (10) and batch_size (20) win over the top-level ones.
    assert _latest_step(model_dir) == 10
    assert re.search(r"^\s+mse\s+\d", result.stdout, flags=re.M), result.stdout
    # MyEstimator names a variable "x", like the feature column x: the export restores it, not a fresh "x_1".
    checkpoint = tf.train.latest_checkpoint(str(model_dir))
    w, b = tf.train.load_variable(checkpoint, "x"), tf.train.load_variable(checkpoint, "b")
    served = tf.saved_model.load(str(_only_export(model_dir))).signatures["serving_default"]
    output = next(iter(served(x=tf.constant([3.0])).values())).numpy()
    np.testing.assert_allclose(output, [w * 3.0 + b], rtol=1e-5)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare to give the program its hard-coded /data/ckpts privately")
def test_iris_dnn_local_runs_unedited_under_compat(tmp_path):
    # The program reads examples/tensorflow/iris/iris.data relative to DLRover's checkout and writes /data/ckpts/.
    work = tmp_path / "dlrover"
    shutil.copytree(SHARED / "iris", work / "examples" / "tensorflow" / "iris")
    data = tmp_path / "data"
    data.mkdir()
    created = not os.path.exists("/data")
    os.makedirs("/data", exist_ok=True)
    try:
        command = (f"mount --bind {data} /data && exec {sys.executable} -m elastimator.compat "
                   "examples/tensorflow/iris/iris_dnn_local.py")
        result = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", command], cwd=work,
                                capture_output=True, text=True, timeout=600,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    finally:
        if created:
            os.rmdir("/data")
    assert result.returncode == 0, result.stderr[-4000:]
    # Its input_fn is built on Dataset.from_generator: it runs, and its user hears once what that costs.
    assert result.stderr.count("The input_fn uses tf.data.Dataset.from_generator") == 1, result.stderr[-3000:]
    # 100 passes over 150 rows at batch 64, evaluated once at the end; the program set INFO verbosity, and
    # the evaluation is logged as tf.estimator logged it. (Its model is unseeded: the accuracy varies by run.)
    assert _latest_step(data / "ckpts") == 235
    logged = re.search(r"Saving dict for global step 235: accuracy = ([0-9.]+), global_step = 235, loss = ([0-9.]+)",
                       result.stderr)
    assert logged and 0 < float(logged.group(1)) <= 1, result.stderr[-3000:]


@pytest.mark.slow  # a parameter server, a chief and a worker, each importing TensorFlow (about a minute)
def test_deepfm_conf_under_launch_with_a_parameter_server(tmp_path):
    work = _example("deepfm_tf", tmp_path)
    model_dir = tmp_path / "launched"
    result = _elastimator(["launch", "deepfm_conf.py:TrainConf", "--ps", "1", "--workers", "1", "--model-dir",
                           str(model_dir)], cwd=work)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert _latest_step(model_dir) == 100  # 200 records shared by chief and worker, batch 2
    assert (model_dir / "train_done.json").exists()


# The criteo_deeprec example's own DeepFM (deepctr_models.py) computes its loss from labels of shape [batch] and
# logits of shape [batch, 1]. Under DLRover the labels' static shape was unknown, so TensorFlow let it through and
# broadcast the loss to [batch, batch]; with labels of a known shape TensorFlow refuses it (first test below). This
# conf, written beside the example's unedited files, hands the same model code its labels as a column.
_LABELS_AS_COLUMN_CONF = '''
import tensorflow.compat.v1 as tf
from deepctr_models import DeepFM
from train_conf import TrainConf as ExampleConf


class DeepFMWithColumnLabels(DeepFM):
    def model_fn(self, features, labels, mode, params):
        labels = None if labels is None else tf.reshape(labels, [-1, 1])
        return super().model_fn(features, labels, mode, params)


class TrainConf(ExampleConf):
    classifier_class = DeepFMWithColumnLabels
    train_set = dict(ExampleConf.train_set, epoch=2)
'''

# deepfm.py, beside it, builds its embeddings with categorical_column_with_embedding + embedding_column under a
# partitioned variable scope; the example's conf names deepctr_models' DeepFM, so this conf names deepfm's.
_FEATURE_COLUMN_CONF = '''
from deepfm import DeepFM
from train_conf import TrainConf as ExampleConf


class TrainConf(ExampleConf):
    classifier_class = DeepFM
    train_set = dict(ExampleConf.train_set, epoch=2)
'''


def _criteo_values(work: Path, column: int) -> set[str]:
    """The distinct non-empty values of field `column` of the example's training file."""
    lines = (work / "data_kaggle_ad_ctr_train.csv").read_text().splitlines()
    return {line.split(",")[column] for line in lines if line.split(",")[column]}


def test_criteo_deeprec_conf_unedited_stops_at_its_label_shape_with_the_line_to_change(tmp_path):
    work = _example("criteo_deeprec", tmp_path)
    result = _elastimator(["run", "train_conf.py:TrainConf", "--no-progress", "--model-dir", str(tmp_path / "m")],
                          cwd=work)
    # Every embedding variable was made and looked up (78 of them) before the loss; the error names the line.
    assert result.returncode != 0
    assert re.search(r"`logits` and `labels` must have the same shape, received \(\(\?, 1\) vs \(\?,\)\)\. at "
                     r".*deepctr_models\.py:\d+ in build_estimator", result.stderr), result.stderr[-3000:]


def test_criteo_deeprec_model_code_trains_and_serves_embedding_variables(tmp_path):
    work = _example("criteo_deeprec", tmp_path)
    (work / "labels_as_column_conf.py").write_text(_LABELS_AS_COLUMN_CONF)
    model_dir = tmp_path / "model"
    result = _elastimator(["run", "labels_as_column_conf.py:TrainConf", "--no-progress", "--model-dir",
                           str(model_dir)], cwd=work)
    assert result.returncode == 0, result.stderr[-4000:]
    assert re.search(r"^\s+auc\s+0\.\d+", result.stdout, flags=re.M), result.stdout
    # Its lookup_embedding_func sized the partitions from TF_CONFIG's ps list, which `run` describes as empty.
    inspected = _elastimator(["inspect", str(model_dir)], cwd=work)
    ids = dict(re.findall(r"^\s+(C\d+_embedding_\d+|I\d+_embedding_\d+)\s+(\d+)$", inspected.stdout, flags=re.M))
    assert len(ids) == 78, inspected.stdout  # 39 features, embedded twice (dimensions 1 and 8)
    assert ids["C1_embedding_8"] == ids["C1_embedding_1"] and 1 <= int(ids["C1_embedding_8"]) <= 199
    served = tf.saved_model.load(str(_only_export(model_dir))).signatures["serving_default"]
    row = {f"I{i}": tf.constant([float(i)]) for i in range(1, 14)}
    row.update({f"C{i}": tf.constant(["05db9164"]) for i in range(1, 27)})
    probs = served(**row)["probs"].numpy()
    assert probs.shape == (1,) and 0 <= probs[0] <= 1


@pytest.mark.slow  # two parameter servers, a chief and two workers, each importing TensorFlow (about a minute)
def test_criteo_deeprec_feature_columns_under_launch_with_two_parameter_servers(tmp_path):
    work = _example("criteo_deeprec", tmp_path)
    (work / "feature_column_conf.py").write_text(_FEATURE_COLUMN_CONF)
    model_dir = tmp_path / "launched"
    result = _elastimator(["launch", "feature_column_conf.py:TrainConf", "--ps", "2", "--workers", "2",
                           "--model-dir", str(model_dir)], cwd=work)
    # Without an evaluator the chief evaluates and exports the final model, as DLRover's trainer did; this
    # example's model_fn computes its loss from the labels before it checks for PREDICT, so it cannot be
    # exported (nor could it be under tf.estimator 2.15): the job ends at once saying so, its training kept.
    assert result.returncode != 0, result.stdout[-4000:]
    chief = (model_dir / "logs" / "chief-0.log").read_text()
    assert re.search(r"training finished and its final checkpoint .*model\.ckpt-\d+ is kept, but evaluating and "
                     r"exporting it failed: ValueError: Argument `labels` must not be None.* at .*deepfm\.py:\d+ "
                     r"in model_fn", chief), chief[-3000:]
    assert chief.count(" start (restart") == 1, chief[-3000:]  # not restarted: a restart would fail the same way
    checkpoint = tf.train.latest_checkpoint(str(model_dir))
    # fixed_size_partitioner(len(ps)) split each table in two; together the parts hold every C1 value trained,
    # each once: the chief and the worker shared the data, and wrote into the same tables.
    prefix = "input_layer/input_layer/C1_embedding/embedding_weights"
    keys = [tf.train.load_variable(checkpoint, f"{prefix}/part_{p}/ids-keys") for p in (0, 1)]
    assert all(len(k) for k in keys)
    assert sorted(k.decode() for part in keys for k in part) == sorted(_criteo_values(work, 14))
    # Partition i's table lives on ps i.
    graph = (model_dir / "graph.pbtxt").read_text()
    table = rf'name: "{prefix}/part_(\d)/ids"\n\s+op: "MutableHashTableOfTensorsV2"\n\s+device: "([^"]+)"'
    placed = re.findall(table, graph)
    assert sorted(placed) == [("0", "/job:ps/task:0"), ("1", "/job:ps/task:1")]
