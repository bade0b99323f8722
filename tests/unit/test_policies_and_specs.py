"""Evaluation policies and the TrainSpec / EvalSpec checks."""

import pytest

import elastimator as est
from elastimator import ConfigError
from elastimator.train_eval.policies import EvalRecord


def _input_fn():
    return None


def test_every_n_seconds_is_tf_estimators_throttle():
    policy = est.EveryNSeconds(600)
    assert policy.should_evaluate(None, 10, now=0.0)
    assert not policy.should_evaluate(EvalRecord(step=10, time=0.0), 50, now=599.0)
    assert policy.should_evaluate(EvalRecord(step=10, time=0.0), 50, now=600.0)
    assert not policy.should_evaluate(EvalRecord(step=50, time=0.0), 50, now=9999.0)  # same checkpoint


def test_every_n_steps_and_combinations():
    steps = est.EveryNSteps(100)
    last = EvalRecord(step=100, time=0.0)
    assert not steps.should_evaluate(last, 199, now=1e9) and steps.should_evaluate(last, 200, now=0.0)
    either = steps | est.EveryNSeconds(60)
    assert either.should_evaluate(last, 150, now=61.0) and either.should_evaluate(last, 200, now=1.0)
    assert not either.should_evaluate(last, 150, now=30.0)
    both = est.AllOf(steps, est.EveryNSeconds(60))
    assert not both.should_evaluate(last, 200, now=30.0) and both.should_evaluate(last, 200, now=60.0)


@pytest.mark.parametrize("make, message", [
    (lambda: est.EveryNSteps(0), "n must be a positive int"),
    (lambda: est.EveryNSeconds(-1), "secs must be >= 0"),
    (lambda: est.AnyOf(), "needs one or more EvalPolicy"),
    (lambda: est.TrainSpec(_input_fn, max_steps=0), "max_steps must be a positive int"),
    (lambda: est.TrainSpec("data.csv"), "input_fn must be callable"),
    (lambda: est.EvalSpec(_input_fn, steps=-5), "steps must be a positive int or None"),
    (lambda: est.EvalSpec(_input_fn, throttle_secs=-1), "throttle_secs must be a number >= 0"),
    (lambda: est.EvalSpec(_input_fn, hooks=[object()]), "SessionRunHook"),
    (lambda: est.EvalSpec(_input_fn, exporters=["final"]), "exporters must be Exporter instances"),
    (lambda: est.EvalSpec(_input_fn, policy=600), "policy must be an EvalPolicy"),
])
def test_bad_specs_and_policies(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_eval_spec_defaults_and_unique_exporter_names():
    spec = est.EvalSpec(_input_fn)
    assert (spec.steps, spec.start_delay_secs, spec.throttle_secs) == (100, 120, 600)
    assert spec.policy == est.EveryNSeconds(600) and spec.exporters == ()
    final = est.FinalExporter("model", lambda: None)
    assert est.EvalSpec(_input_fn, exporters=final).exporters == (final,)
    with pytest.raises(ConfigError, match=r"exporter names must be unique.*\['model'\]"):
        est.EvalSpec(_input_fn, exporters=[final, est.LatestExporter("model", lambda: None)])


def test_exporter_argument_checks():
    with pytest.raises(ConfigError, match="compare_fn must take exactly two arguments named best_eval_result"):
        est.BestExporter(serving_input_receiver_fn=lambda: None, compare_fn=lambda a, b: True)
    with pytest.raises(ConfigError, match="name must be a non-empty string"):
        est.FinalExporter("", lambda: None)
    with pytest.raises(ConfigError, match="serving_input_receiver_fn must be callable"):
        est.LatestExporter("latest", None)
    with pytest.raises(ConfigError, match="exports_to_keep must be a positive int"):
        est.LatestExporter("latest", lambda: None, exports_to_keep=0)
