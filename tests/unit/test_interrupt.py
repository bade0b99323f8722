"""Ctrl-C during train(): the step finishes, a checkpoint is saved, then the signal acts (SIGTERM, which ends
the process, is in tests/integration/test_signals.py)."""

import signal

import pytest
from tests.helpers import SignalAtStep, train_input


def test_ctrl_c_saves_a_checkpoint_at_the_current_step_then_raises_keyboard_interrupt(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=100)
    x, y = iris
    with pytest.raises(KeyboardInterrupt):
        estimator.train(train_input(x, y), max_steps=1000, hooks=[SignalAtStep(signal.SIGINT, 37)])
    assert estimator.latest_checkpoint().endswith("model.ckpt-37")  # not the step-0 checkpoint: no work lost
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers are put back
    estimator.train(train_input(x, y), max_steps=40)  # and training resumes from there
    assert estimator.latest_checkpoint().endswith("model.ckpt-40")
