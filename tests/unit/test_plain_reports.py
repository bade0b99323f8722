"""What the user reads says each thing once and truly: a model_fn's name is not repeated, `report` is titled by the
newest checkpoint's step and prints none of matplotlib's cache lines, and a rerun's best exporter names no stale
"best" evaluation."""

import logging
import os
import subprocess
import sys

import pytest

import elastimator as est
from elastimator.errors import ModelFnError
from tests.helpers import eval_input, linear_model_fn, train_input

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_model_fn_named_model_fn_is_named_once(tmp_path, iris):
    def model_fn(features, labels, mode):
        return {"logits": features["x"]}

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path / "m"))
    with pytest.raises(ModelFnError) as raised:
        estimator.train(train_input(*iris), max_steps=1)
    assert str(raised.value).startswith("test_a_model_fn_named_model_fn_is_named_once.<locals>.model_fn must return "
                                        "an EstimatorSpec; got dict")

    def my_network(features, labels, mode):
        return None

    with pytest.raises(ModelFnError, match=r"^model_fn test_a_model_fn_named_model_fn_is_named_once.<locals>."
                                           r"my_network must return an EstimatorSpec"):
        est.Estimator(my_network, model_dir=str(tmp_path / "n")).train(train_input(*iris), max_steps=1)


@pytest.fixture
def trained_250(make_estimator, iris):
    """Checkpoints 0 and 250; the loss logged at steps 1, 101 and 201 (every 100)."""
    estimator = make_estimator(log_step_count_steps=100, save_summary_steps=100)
    estimator.train(train_input(*iris), max_steps=250)
    return estimator.model_dir


def test_the_report_is_titled_by_the_newest_checkpoint_and_prints_no_font_cache_line(trained_250, tmp_path):
    from elastimator.job.metrics_chart import trained_to  # pylint: disable=import-outside-toplevel

    assert trained_to(trained_250, [1, 101, 201], {}) == 250
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), MPLCONFIGDIR=str(tmp_path / "fresh-mpl-cache"))
    result = subprocess.run([sys.executable, "-m", "elastimator.cli", "report", trained_250], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert os.path.isdir(tmp_path / "fresh-mpl-cache")  # matplotlib did build its cache in this run
    assert "fontManager" not in result.stderr and "matplotlib" not in result.stderr, result.stderr


def test_a_reruns_best_exporter_names_no_stale_best(make_estimator, iris, caplog):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=10)
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": x[:1]})
    estimator.train(train_input(x, y), max_steps=10)
    estimator.evaluate(eval_input(x, y))
    estimator.train(train_input(x, y), max_steps=40)
    last = estimator.evaluate(eval_input(x, y))
    path = os.path.join(estimator.model_dir, "export", "best")
    assert est.BestExporter("best", receiver).export(estimator, path, estimator.latest_checkpoint(), last, True)
    # A rerun with nothing left to train evaluates step 40 again: its exporter has nothing to compare.
    again = estimator.evaluate(eval_input(x, y))
    with caplog.at_level(logging.INFO, logger="elastimator"):
        assert est.BestExporter("best", receiver).export(estimator, path, estimator.latest_checkpoint(), again,
                                                         True) is None
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "already holds an export of global step 40" in said and "is at step 10" not in said, said
