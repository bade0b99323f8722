"""An evaluation of global step 0 (the model before training) is never exported as the best, and a job summary
without an export says why there is none."""

import os

import elastimator as est
from elastimator.job.inspect_dir import inspect_model_dir, job_rows
from tests.helpers import eval_input, train_input


def _evaluated_at_step_0(make_estimator, iris):
    """A model_dir as a job stopped early leaves it: checkpoints 0 and 5, one evaluation, of step 0."""
    x, y = iris
    estimator = make_estimator()
    estimator.train(train_input(x, y), max_steps=5)
    step_0 = os.path.join(estimator.model_dir, "model.ckpt-0")
    metrics = estimator.evaluate(eval_input(x, y), checkpoint_path=step_0)
    assert metrics["global_step"] == 0
    return estimator, step_0, metrics


def test_best_exporter_does_not_export_step_0(make_estimator, iris):
    estimator, step_0, metrics = _evaluated_at_step_0(make_estimator, iris)
    receiver = est.export.build_raw_serving_input_receiver_fn({"x": iris[0][:1]})
    exporter = est.BestExporter("best", receiver)
    path = os.path.join(estimator.model_dir, "export", "best")
    assert exporter.export(estimator, path, step_0, metrics, False) is None
    assert not os.path.exists(path)
    # The first evaluation of a trained checkpoint exports, the step-0 one in the events not counted as better.
    trained = estimator.evaluate(eval_input(*iris))
    worse_than_step_0 = dict(trained, loss=metrics["loss"] + 1.0)
    assert exporter.export(estimator, path, estimator.latest_checkpoint(), worse_than_step_0, False) is not None
    assert len(os.listdir(path)) == 1


def test_a_summary_without_an_export_says_why(make_estimator, iris):
    estimator, _, _ = _evaluated_at_step_0(make_estimator, iris)
    rows = dict(job_rows(inspect_model_dir(estimator.model_dir)))
    assert rows["export"].startswith("none: the only evaluation was of step 0, the model before training")
    assert f"elastimator export CONF --model-dir {estimator.model_dir}" in rows["export"]
