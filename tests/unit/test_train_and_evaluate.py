"""train_and_evaluate in local mode: evaluations, exporters, early stopping, metrics."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import ConfigError
from elastimator.train_eval import eval_rounds
from tests.helpers import eval_input, linear_model_fn, read_events, train_input


@pytest.fixture
def receiver(iris):
    return est.export.build_raw_serving_input_receiver_fn({"x": iris[0][:1]})


def _exports(model_dir, name):
    path = os.path.join(model_dir, "export", name)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def test_local_mode_evaluates_after_checkpoints_and_exports(make_estimator, iris, receiver):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=50)
    eval_spec = est.EvalSpec(eval_input(x, y), steps=None, throttle_secs=0, exporters=[
        est.FinalExporter("final", receiver),
        est.LatestExporter("latest", receiver, exports_to_keep=2),
        est.BestExporter("best", receiver),
    ])
    metrics, exports = est.train_and_evaluate(estimator, est.TrainSpec(train_input(x, y), max_steps=150), eval_spec)
    assert metrics["global_step"] == 150 and metrics["accuracy"] > 0.8
    assert [step for step, _ in read_events(estimator.eval_dir())["loss"]] == [50, 100, 150]
    assert len(_exports(estimator.model_dir, "final")) == 1
    assert len(_exports(estimator.model_dir, "latest")) == 2  # three exports, two kept
    assert 1 <= len(_exports(estimator.model_dir, "best")) <= 3
    assert {os.path.dirname(p.decode()) for p in exports} >= {
        os.path.join(estimator.model_dir, "export", "final"), os.path.join(estimator.model_dir, "export", "latest")}


def test_evaluation_every_n_steps(make_estimator, iris):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=10)
    eval_spec = est.EvalSpec(eval_input(x, y), steps=None, policy=est.EveryNSteps(40))
    est.train_and_evaluate(estimator, est.TrainSpec(train_input(x, y), max_steps=100), eval_spec)
    assert [step for step, _ in read_events(estimator.eval_dir())["loss"]] == [10, 50, 90, 100]


def test_final_exporter_runs_when_training_ends_with_the_input(make_estimator, iris, receiver):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=3)
    eval_spec = est.EvalSpec(eval_input(x, y), throttle_secs=0, exporters=est.FinalExporter("final", receiver))
    metrics, exports = est.train_and_evaluate(
        estimator, est.TrainSpec(train_input(x, y, batch_size=50, num_epochs=2)), eval_spec)
    assert metrics["global_step"] == 6 and len(exports) == 1
    assert len(_exports(estimator.model_dir, "final")) == 1


def test_local_mode_needs_checkpoints(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=None, save_checkpoints_secs=None)
    with pytest.raises(ConfigError, match="saves none"):
        est.train_and_evaluate(estimator, est.TrainSpec(train_input(*iris), max_steps=5),
                               est.EvalSpec(eval_input(*iris)))


def test_best_exporter_survives_a_restart_without_worse_or_skipped_exports(make_estimator, iris, receiver):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=30)
    best = os.path.join(estimator.model_dir, "export", "best")
    eval_spec = est.EvalSpec(eval_input(x, y), steps=None, throttle_secs=0,
                             exporters=est.BestExporter("best", receiver))
    est.train_and_evaluate(estimator, est.TrainSpec(train_input(x, y), max_steps=30), eval_spec)
    assert len(os.listdir(best)) == 1  # the first evaluation exported; it was not compared with itself
    best_loss = read_events(estimator.eval_dir())["loss"][0][1]

    # A restarted process has a new exporter that knows the best result only from the events.
    restarted = est.BestExporter("best", receiver)
    checkpoint = estimator.latest_checkpoint()
    worse = {"loss": best_loss + 1.0, "global_step": 45}
    assert restarted.export(estimator, best, checkpoint, worse, False) is None
    assert len(os.listdir(best)) == 1
    better = {"loss": best_loss - 0.01, "global_step": 60}
    assert restarted.export(estimator, best, checkpoint, better, False) is not None
    assert len(os.listdir(best)) == 2


def test_best_exporter_exports_first_even_when_current_events_exist(make_estimator, iris, receiver):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=20)
    estimator.train(train_input(x, y), max_steps=20)
    metrics = estimator.evaluate(eval_input(x, y))  # writes events at step 20
    exporter = est.BestExporter("best", receiver)
    path = os.path.join(estimator.model_dir, "export", "best")
    assert exporter.export(estimator, path, estimator.latest_checkpoint(), metrics, False) is not None


def test_no_checkpoint_is_exported_twice_under_one_name(make_estimator, iris, receiver):
    """A restarted evaluator re-evaluates the newest checkpoint; its exports are already there."""
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=20)
    estimator.train(train_input(x, y), max_steps=20)
    metrics = estimator.evaluate(eval_input(x, y))
    for exporter in (est.BestExporter("best", receiver), est.LatestExporter("latest", receiver),
                     est.FinalExporter("final", receiver)):
        path = os.path.join(estimator.model_dir, "export", exporter.name)
        assert exporter.export(estimator, path, estimator.latest_checkpoint(), metrics, True) is not None
        again = type(exporter)(exporter.name, receiver)  # a new process's exporter
        assert again.export(estimator, path, estimator.latest_checkpoint(), metrics, True) is None
        assert len(os.listdir(path)) == 1
        with open(os.path.join(path, os.listdir(path)[0], "assets.extra", "elastimator_origin.json")) as f:
            assert json.load(f) == {"global_step": 20, "checkpoint": "model.ckpt-20"}


def test_early_stopping_in_local_mode(make_estimator, iris):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=20)
    hook = est.stop_if_lower_hook(estimator, "loss", threshold=100.0, run_every_secs=None, run_every_steps=1)
    metrics, _ = est.train_and_evaluate(estimator, est.TrainSpec(train_input(x, y), max_steps=10_000, hooks=[hook]),
                                        est.EvalSpec(eval_input(x, y), throttle_secs=0))
    # The first evaluation (step 20) already satisfies the condition; training stops right there.
    assert metrics["global_step"] == 20 and estimator.get_variable_value("global_step") == 20


def test_stop_if_no_decrease_reads_the_eval_history(make_estimator, iris):
    estimator = make_estimator()
    writer_dir = estimator.eval_dir()
    for step, loss in ((100, 0.5), (200, 0.4), (300, 0.45), (400, 0.41)):
        evaluator_summary = {"loss": loss, "global_step": step}
        from elastimator.estimator.loops.evaluate_loop import write_eval_summaries
        write_eval_summaries(writer_dir, step, evaluator_summary)
    stalled = est.stop_if_no_decrease_hook(estimator, "loss", max_steps_without_decrease=200)
    patient = est.stop_if_no_decrease_hook(estimator, "loss", max_steps_without_decrease=300)
    assert stalled._should_stop() and not patient._should_stop()
    higher = est.stop_if_higher_hook(estimator, "loss", 0.49, min_steps=150)
    assert not higher._should_stop()
    with pytest.raises(ConfigError, match="watches metric 'auc'.*has only \\['loss'\\]"):
        est.stop_if_higher_hook(estimator, "auc", 0.5)._should_stop()


def test_add_metrics(make_estimator, iris):
    x, y = iris
    estimator = make_estimator()
    estimator.train(train_input(x, y), steps=50)

    def metric_fn(labels, predictions):
        return {"mean_class": tf.compat.v1.metrics.mean(predictions["classes"]),
                "accuracy": tf.compat.v1.metrics.accuracy(labels, tf.zeros_like(labels))}

    extended = est.add_metrics(estimator, metric_fn)
    metrics = extended.evaluate(eval_input(x, y))
    assert set(metrics) == {"accuracy", "mean_class", "loss", "global_step"}
    assert metrics["accuracy"] == pytest.approx(np.mean(y == 0))  # metric_fn's accuracy replaced the model's
    assert extended.model_dir == estimator.model_dir
    with pytest.raises(ConfigError, match="metric_fn must take some of"):
        est.add_metrics(estimator, lambda logits: {})


def test_windowed_training_metrics(make_estimator, iris):
    x, y = iris

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        if mode != est.ModeKeys.TRAIN:
            return spec
        one = tf.constant([True])
        with tf.compat.v1.variable_scope("train_metrics"):  # counts train steps, reset every 10
            windowed, update = tf.compat.v1.metrics.true_positives(one, one)
        cumulative, cumulative_update = tf.compat.v1.metrics.true_positives(one, one)
        tf.compat.v1.summary.scalar("windowed_steps", windowed)
        tf.compat.v1.summary.scalar("cumulative_steps", cumulative)
        return spec._replace(train_op=tf.group(spec.train_op, update, cumulative_update),
                            training_hooks=[est.ResetMetricsHook(10, scope="train_metrics")])

    estimator = make_estimator(model_fn=model_fn, save_summary_steps=1)
    estimator.train(train_input(x, y), steps=60)
    events = read_events(estimator.model_dir)
    windowed = [value for _, value in events["windowed_steps"]]
    cumulative = [value for _, value in events["cumulative_steps"]]
    # A summary may be read just before or after its step's update: allow one step either way.
    assert max(cumulative) >= 59 and max(windowed) <= 11
    assert sum(1 for value in windowed if value >= 9) >= 5  # every window filled up before its reset


def test_evaluator_never_misses_the_final_checkpoint(make_estimator, iris, receiver):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=10, keep_checkpoint_max=1)
    estimator.train(train_input(x, y, batch_size=50, num_epochs=10))  # ends with the input at step 30
    eval_rounds.mark_training_done(estimator.model_dir, 30)
    eval_spec = est.EvalSpec(eval_input(x, y), start_delay_secs=0, throttle_secs=10_000,
                             exporters=est.FinalExporter("final", receiver))
    sleeps = []
    result = eval_rounds.run_evaluator(estimator, eval_spec, max_steps=None, sleep=sleeps.append)
    assert result.step == 30 and result.final and len(result.export_results) == 1
    assert sleeps == []  # nothing to wait for: the final checkpoint was there


def test_evaluator_runs_final_exports_for_an_already_evaluated_checkpoint(make_estimator, iris, receiver):
    x, y = iris
    estimator = make_estimator(save_checkpoints_steps=100)
    estimator.train(train_input(x, y), max_steps=20)
    eval_spec = est.EvalSpec(eval_input(x, y), start_delay_secs=0, throttle_secs=0,
                             exporters=est.FinalExporter("final", receiver))

    def sleep(_):  # the chief marks training done only after the evaluator saw step 20
        eval_rounds.mark_training_done(estimator.model_dir, 20)

    result = eval_rounds.run_evaluator(estimator, eval_spec, max_steps=1000, sleep=sleep)
    assert result.step == 20 and result.final and len(result.export_results) == 1


def test_a_checkpoint_caught_half_deleted_is_not_snapshotted(make_estimator, iris, tmp_path):
    """keep_checkpoint_max deletes a checkpoint's files one by one: an evaluator that finds its index but not its
    data moves on to the newest checkpoint instead of failing to restore."""
    estimator = make_estimator()
    estimator.train(train_input(*iris), max_steps=5)
    checkpoint = tf.train.latest_checkpoint(estimator.model_dir)
    whole = eval_rounds.snapshot(checkpoint, str(tmp_path / "whole"))
    assert whole is not None and tf.train.load_variable(whole, "global_step") == 5
    for data in tf.io.gfile.glob(checkpoint + ".data-*"):
        os.remove(data)
    assert eval_rounds.snapshot(checkpoint, str(tmp_path / "half")) is None
