"""The progress line's cost and wording: 2.15's through TensorFlow's logger at INFO verbosity, elastimator's own
where only its logger prints, and no fetch where neither would print."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from elastimator.estimator.loops.hooks import ProgressLogHook


@pytest.fixture
def loggers():
    """TensorFlow's and elastimator's loggers, each level restored after the test, with their records."""
    records = []
    catcher = logging.Handler()
    catcher.emit = records.append
    kept = [(lg, lg.level) for lg in (tf.get_logger(), logging.getLogger("elastimator"))]
    for lg, _ in kept:
        lg.addHandler(catcher)
    yield kept[0][0], kept[1][0], records
    for lg, level in kept:
        lg.removeHandler(catcher)
        lg.setLevel(level)


def _run_steps(hook, steps):
    """Runs the hook's calls as a session would, the global step after each call being `steps[i]`."""
    class Values:
        def __init__(self, results):
            self.results = results

    hook.begin()
    for step in steps:
        args = hook.before_run(None)
        hook.after_run(None, Values(None if args is None else [np.float32(0.25), np.int64(step)]))
    return args


def test_nothing_is_fetched_where_no_logger_prints_info(loggers):
    tf_logger, ours, records = loggers
    tf_logger.setLevel(logging.WARNING)
    ours.setLevel(logging.WARNING)
    with tf.Graph().as_default():
        hook = ProgressLogHook(tf.constant(0.25), tf.constant(1, tf.int64), every_n_steps=100)
        assert _run_steps(hook, [1, 2, 3]) is None
    assert records == []


def test_at_info_verbosity_the_line_is_2_15s_through_tensorflows_logger_only(loggers):
    tf_logger, ours, records = loggers
    tf_logger.setLevel(logging.INFO)
    ours.setLevel(logging.INFO)
    with tf.Graph().as_default():
        hook = ProgressLogHook(tf.constant(0.25), tf.constant(1, tf.int64), every_n_steps=100)
        _run_steps(hook, [251, 300, 351, 400, 451])  # a call resumed at step 250
    messages = [(r.name, r.getMessage()) for r in records]
    assert [m.split(" (")[0] for _, m in messages] == ["loss = 0.25, step = 250", "loss = 0.25, step = 350",
                                                       "loss = 0.25, step = 450"]
    assert {name for name, _ in messages} == {"tensorflow"}
    assert messages[1][1].endswith(" sec)") and "(" not in messages[0][1]


def test_where_only_elastimators_logger_prints_info_its_own_line(loggers):
    tf_logger, ours, records = loggers
    tf_logger.setLevel(logging.ERROR)  # as the command line leaves it
    ours.setLevel(logging.INFO)
    with tf.Graph().as_default():
        hook = ProgressLogHook(tf.constant(0.25), tf.constant(1, tf.int64), every_n_steps=10)
        _run_steps(hook, [1, 11])
    assert [(r.name, r.getMessage().split(" (")[0]) for r in records] == [
        ("elastimator", "step 0: loss = 0.25"), ("elastimator", "step 10: loss = 0.25")]
