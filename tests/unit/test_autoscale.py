"""The scaling policy, driven through traces of (time, workers, steps/s, ps CPU)."""

import pytest

from elastimator.cluster.autoscale import Measurement, ScalingLimits, decide

LIMITS = ScalingLimits(min_workers=1, max_workers=4, cooldown_secs=60)


def trace(*rows):
    return [Measurement(t, w, rate, cpu) for t, w, rate, cpu in rows]


def test_adds_workers_while_throughput_scales():
    history = trace((0, 1, 40.0, 0.2), (30, 1, 41.0, 0.2), (60, 1, 40.0, 0.2))
    assert decide(history, LIMITS).workers == 2
    history += trace((90, 2, 58.0, 0.3), (120, 2, 60.0, 0.3), (150, 2, 61.0, 0.3))
    decision = decide(history, LIMITS)
    assert decision.workers == 3 and "adding a worker" in decision.reason


def test_holds_during_the_cooldown_after_a_change():
    history = trace((0, 1, 40.0, 0.2), (60, 1, 40.0, 0.2), (90, 2, 55.0, 0.3))
    decision = decide(history, LIMITS)
    assert decision.workers == 2 and decision.reason.startswith("holding")


def test_removes_a_worker_when_the_ps_saturates():
    history = trace((0, 3, 90.0, 0.6), (60, 3, 92.0, 0.9), (90, 3, 91.0, 0.95))
    decision = decide(history, LIMITS)
    assert decision.workers == 2 and "parameter servers at 95% CPU" in decision.reason


def test_removes_a_worker_that_brought_nothing():
    # 2 workers (3 trainers) ran 60 steps/s, 20 each; the third worker added under 25% of that.
    history = trace((0, 2, 60.0, 0.4), (60, 2, 60.0, 0.4), (90, 3, 62.0, 0.5), (150, 3, 63.0, 0.5))
    decision = decide(history, LIMITS)
    assert decision.workers == 2 and "the last worker added" in decision.reason


def test_stays_within_its_limits():
    assert decide(trace((0, 4, 100.0, 0.3), (90, 4, 100.0, 0.3)), LIMITS).workers == 4
    assert decide(trace((0, 1, 30.0, 0.99), (90, 1, 30.0, 0.99)), LIMITS).workers == 1
    assert decide(trace((0, 6, 30.0, 0.5)), LIMITS).workers == 4
    assert decide([], LIMITS).workers == 1


def test_limits_are_checked():
    with pytest.raises(ValueError, match="min_workers <= max_workers"):
        ScalingLimits(min_workers=3, max_workers=2)
