"""Ctrl-C during train(): the step finishes, a checkpoint is saved, then the signal acts (SIGTERM, which ends
the process, is in tests/integration/test_signals.py)."""

import signal

import pytest
from tests.helpers import SignalAtStep, train_input


@pytest.fixture
def sigint_as(request):
    """SIGINT's disposition for the test (whatever the process running the tests was started with), put back
    after it."""
    before = signal.signal(signal.SIGINT, request.param)
    yield request.param
    signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("sigint_as", [signal.default_int_handler], indirect=True)
def test_ctrl_c_saves_a_checkpoint_at_the_current_step_then_raises_keyboard_interrupt(make_estimator, iris, sigint_as):
    estimator = make_estimator(save_checkpoints_steps=100)
    x, y = iris
    with pytest.raises(KeyboardInterrupt):
        estimator.train(train_input(x, y), max_steps=1000, hooks=[SignalAtStep(signal.SIGINT, 37)])
    assert estimator.latest_checkpoint().endswith("model.ckpt-37")  # not the step-0 checkpoint: no work lost
    assert signal.getsignal(signal.SIGINT) is sigint_as  # handlers are put back
    estimator.train(train_input(x, y), max_steps=40)  # and training resumes from there
    assert estimator.latest_checkpoint().endswith("model.ckpt-40")


@pytest.mark.parametrize("sigint_as", [signal.SIG_IGN], indirect=True)
def test_a_sigint_the_process_was_started_ignoring_stays_ignored(make_estimator, iris, sigint_as):
    """nohup and background jobs start with SIGINT ignored: training goes on through one."""
    estimator = make_estimator(save_checkpoints_steps=100)
    x, y = iris
    estimator.train(train_input(x, y), max_steps=60, hooks=[SignalAtStep(signal.SIGINT, 37)])
    assert estimator.latest_checkpoint().endswith("model.ckpt-60")
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
