"""The `elastimator` command, run as a user runs it: a subprocess, exit codes, stdout and stderr."""

import csv
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(os.path.dirname(sys.executable), "elastimator")
TINY = os.path.join(ROOT, "tests", "integration", "tiny_conf.py") + ":TinyConf"


def _cli(*args, env=None, timeout=300):
    # This tree's code (src) first, as an installed package's would be; ROOT for the tests' own confs.
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT]), **(env or {}))
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT)


def write_iris(directory) -> None:
    """The tiny conf's data: iris as `directory`/train.csv (a, b, c, d, species)."""
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    with open(directory / "train.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["a", "b", "c", "d", "species"])
        writer.writerows([[*row, label] for row, label in zip(x, y)])


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tiny")
    write_iris(directory)
    return str(directory)


@pytest.fixture(scope="module")
def trained(tiny_data):
    result = _cli("run", TINY, env={"TINY_DATA": tiny_data})
    assert result.returncode == 0, result.stderr[-3000:]
    return tiny_data, result


def test_help_for_every_command():
    result = _cli("--help")
    assert result.returncode == 0
    for command in ("run", "export", "predict", "inspect", "report", "launch", "scale", "k8s"):
        assert command in result.stdout
        assert _cli(command, "--help").returncode == 0


def test_an_unexpected_failure_is_one_line_unless_verbose(tmp_path):
    """A kubeconfig the client cannot read, a bug: one line; the traceback with --verbose."""
    manifest = tmp_path / "job.yaml"
    assert _cli("k8s", "manifest", "examples/census/census_conf.py", "--image", "r/c:1", "--pvc", "m", "-o",
                str(manifest)).returncode == 0
    env = {"KUBECONFIG": str(tmp_path / "no-such-kubeconfig"), "KUBERNETES_SERVICE_HOST": ""}
    quiet = _cli("k8s", "submit", str(manifest), env=env)
    assert quiet.returncode == 1 and quiet.stderr.count("\n") == 1, quiet.stderr
    assert "elastimator: error: no Kubernetes cluster to talk to" in quiet.stderr
    # A bug in the user's model_fn: one line that says where; the traceback on request.
    conf = tmp_path / "buggy_conf.py"
    conf.write_text(open(TINY.split(":")[0]).read().replace(
        "    stacked = tf.stack(", "    1 / 0\n    stacked = tf.stack("))
    env = {"TINY_DATA": str(tmp_path)}
    (tmp_path / "train.csv").write_text("a,b,c,d,species\n1,2,3,4,0\n")
    buggy = _cli("run", f"{conf}:TinyConf", env=env)
    assert buggy.returncode == 1, buggy.stderr[-2000:]
    assert f"elastimator: error: ZeroDivisionError: division by zero at {conf}:" in buggy.stderr
    assert "in iris_model_fn (--verbose shows the traceback)" in buggy.stderr
    assert "Traceback" not in buggy.stderr
    verbose = _cli("--verbose", "run", f"{conf}:TinyConf", env=env)
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr


def test_run_trains_evaluates_exports_and_prints_a_summary(trained):
    data, result = trained
    assert "job TinyConf finished" in result.stdout
    assert "global step" in result.stdout and "accuracy" in result.stdout
    exports = os.listdir(os.path.join(data, "model", "export", "latest"))
    assert len(exports) == 2  # evaluations at steps 75 and 150
    # Not a terminal: progress comes as plain lines, not carriage returns.
    assert "step 150/150" in result.stderr and "\r" not in result.stderr


def test_inspect_and_report(trained):
    data, _ = trained
    inspected = _cli("inspect", os.path.join(data, "model"))
    assert inspected.returncode == 0
    assert "checkpoints (3): steps 0, 75, 150" in inspected.stdout
    assert "last evaluation (eval/, step 150)" in inspected.stdout and "exports 'latest' (2)" in inspected.stdout
    png = os.path.join(data, "report.png")
    reported = _cli("report", os.path.join(data, "model"), "--output", png)
    assert reported.returncode == 0 and reported.stdout.strip() == png
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_export_and_batch_predict(trained, tmp_path):
    data, result = trained
    exported = _cli("export", TINY, "--export-dir", str(tmp_path / "exports"), env={"TINY_DATA": data})
    assert exported.returncode == 0, exported.stderr[-2000:]
    export_dir = exported.stdout.strip().splitlines()[-1]
    assert os.path.isfile(os.path.join(export_dir, "saved_model.pb"))
    out = tmp_path / "predictions.csv"
    predicted = _cli("predict", "--saved-model", export_dir, "--input", os.path.join(data, "train.csv"),
                     "--output", str(out), "--batch-size", "40")
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    assert "Ignoring input column(s) the model does not take: species" in predicted.stderr
    rows = list(csv.reader(open(out)))
    assert rows[0] == ["classes", "probabilities_0", "probabilities_1", "probabilities_2"]
    assert len(rows) == 151
    labels = np.array([int(r[-1]) for r in list(csv.reader(open(os.path.join(data, "train.csv"))))[1:]])
    accuracy = np.mean(np.array([int(r[0]) for r in rows[1:]]) == labels)
    # The exported model is the one evaluated at step 150 on the same file: same accuracy.
    evaluated = float(re.search(r"accuracy +([0-9.]+)", result.stdout).group(1))
    assert accuracy == pytest.approx(evaluated, abs=1e-6) and accuracy > 0.6


def test_invalid_conf_exits_2_with_the_reason_on_stderr(tmp_path):
    conf = tmp_path / "bad_conf.py"
    conf.write_text("classifier_class = print\nmax_step = 10\n")
    result = _cli("run", str(conf))
    assert result.returncode == 2 and result.stdout == ""
    assert "elastimator: error: conf: unknown key(s) 'max_step' (did you mean 'max_steps'?)" in result.stderr
    assert _cli("run").returncode == 2  # argparse: missing CONF


def test_malformed_records_stop_the_job_with_file_and_line(tiny_data, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = open(os.path.join(tiny_data, "train.csv")).read().splitlines()
    lines[5] = "5.1,3.5,oops,0.2,0"
    (bad / "train.csv").write_text("\n".join(lines) + "\n")
    result = _cli("run", TINY, env={"TINY_DATA": str(bad)})
    assert result.returncode == 3  # a failure a restart would repeat
    assert f"{bad / 'train.csv'}:6: field 'c' = 'oops' is not a valid float32" in result.stderr
    assert "more than max_bad_records=0" in result.stderr
    tolerated = _cli("run", TINY, env={"TINY_DATA": str(bad), "TINY_MAX_BAD": "5"})
    assert tolerated.returncode == 0, tolerated.stderr[-2000:]
    assert "bad records (train_set)" in tolerated.stdout


def test_predict_with_a_missing_input_column(trained, tmp_path):
    data, _ = trained
    export_root = os.path.join(data, "model", "export", "latest")
    export_dir = os.path.join(export_root, sorted(os.listdir(export_root))[-1])
    partial = tmp_path / "partial.csv"
    partial.write_text("a,b\n1,2\n")
    result = _cli("predict", "--saved-model", export_dir, "--input", str(partial))
    assert result.returncode == 1
    assert "lacks column(s) ['c', 'd'] that the model takes" in result.stderr


def test_a_failed_predict_leaves_its_output_as_it_was(trained, tmp_path):
    data, _ = trained
    out = tmp_path / "predictions.csv"
    out.write_text("earlier,predictions\n1,2\n")
    wrong_model = _cli("predict", "--saved-model", str(tmp_path / "no-model"), "--input",
                       os.path.join(data, "train.csv"), "--output", str(out))
    assert wrong_model.returncode == 2 and "does not exist" in wrong_model.stderr  # bad usage, as the README says
    missing_input = _cli("predict", "--saved-model", os.path.join(data, "model"), "--input",
                         str(tmp_path / "nothing.csv"), "--output", str(out))
    assert missing_input.returncode == 2 and "--input" in missing_input.stderr \
        and "does not exist" in missing_input.stderr
    bad_row = tmp_path / "bad.csv"
    bad_row.write_text("a,b,c,d\n5.1,3.5,1.4,0.2\n5.1,x,1.4,0.2\n")
    malformed = _cli("predict", "--saved-model", os.path.join(data, "model"), "--input", str(bad_row),
                     "--output", str(out))
    assert malformed.returncode == 1 and f"{bad_row}:3: input 'b' = 'x' is not a valid float32" in malformed.stderr
    assert out.read_text() == "earlier,predictions\n1,2\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".predictions")] == []  # no temporary left


def test_predict_takes_a_model_dir_and_uses_its_newest_export(trained, tmp_path):
    data, _ = trained
    model_dir = os.path.join(data, "model")
    newest = sorted(os.listdir(os.path.join(model_dir, "export", "latest")), key=int)[-1]
    out = tmp_path / "predictions.csv"
    result = _cli("predict", "--saved-model", model_dir, "--input", os.path.join(data, "train.csv"),
                  "--output", str(out), "--keep-columns", "species,a")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"Using the newest export under {model_dir}: {os.path.join(model_dir, 'export', 'latest', newest)}" \
        in result.stderr
    rows = list(csv.reader(open(out)))
    inputs = list(csv.reader(open(os.path.join(data, "train.csv"))))
    assert len(rows) == 151 and rows[0][:3] == ["species", "a", "classes"]
    assert [r[:2] for r in rows[1:]] == [[r[4], r[0]] for r in inputs[1:]]  # kept as written, row by row
    unknown = _cli("predict", "--saved-model", model_dir, "--input", os.path.join(data, "train.csv"),
                   "--keep-columns", "id")
    assert unknown.returncode == 1 and "--keep-columns names ['id']" in unknown.stderr
    empty = tmp_path / "untrained"
    empty.mkdir()
    nothing = _cli("predict", "--saved-model", str(empty), "--input", os.path.join(data, "train.csv"))
    assert nothing.returncode == 1 and "has no export under it" in nothing.stderr


def test_k8s_validate_checks_a_written_manifest(tmp_path):
    manifest = tmp_path / "job.yaml"
    written = _cli("k8s", "manifest", "examples/census/census_conf.py", "--image", "registry/census:1",
                   "--pvc", "census-model", "--output", str(manifest))
    assert written.returncode == 0, written.stderr[-2000:]
    valid = _cli("k8s", "validate", str(manifest))
    assert valid.returncode == 0 and "valid (Secret, NetworkPolicy, TFJob)" in valid.stdout, valid.stderr[-2000:]
    manifest.write_text(manifest.read_text().replace("replicas:", "replicaz:", 1))
    invalid = _cli("k8s", "validate", str(manifest))
    assert invalid.returncode == 1 and "the manifest is invalid" in invalid.stderr
