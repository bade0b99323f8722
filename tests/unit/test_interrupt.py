"""Ctrl-C and SIGTERM during train(): the step finishes, a checkpoint is saved, then the signal acts."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tests.helpers import train_input


class SignalAtStep(tf.compat.v1.train.SessionRunHook):
    """Sends this process `signum` after global step `step` (as a person or Kubernetes would, mid-training)."""

    def __init__(self, signum, step):
        self.signum, self.step = signum, step

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def after_run(self, run_context, run_values):
        if run_context.session.run(self._global_step) == self.step:
            os.kill(os.getpid(), self.signum)


def test_ctrl_c_saves_a_checkpoint_at_the_current_step_then_raises_keyboard_interrupt(make_estimator, iris):
    estimator = make_estimator(save_checkpoints_steps=100)
    x, y = iris
    with pytest.raises(KeyboardInterrupt):
        estimator.train(train_input(x, y), max_steps=1000, hooks=[SignalAtStep(signal.SIGINT, 37)])
    assert estimator.latest_checkpoint().endswith("model.ckpt-37")  # not the step-0 checkpoint: no work lost
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers are put back
    estimator.train(train_input(x, y), max_steps=40)  # and training resumes from there
    assert estimator.latest_checkpoint().endswith("model.ckpt-40")


def _training_program(tmp_path, hook: str):
    """A program that trains in model_dir tmp_path/model with `hook` (a Python expression), then prints
    "not reached"."""
    program = tmp_path / "train.py"
    program.write_text(textwrap.dedent(f"""
        import signal, sys
        sys.path.insert(0, {os.getcwd()!r})
        import numpy as np
        import elastimator as est
        from tests.helpers import linear_model_fn, train_input
        from tests.unit.test_interrupt import BlockAtStep, SignalAtStep
        x = np.random.RandomState(0).normal(size=(150, 4)).astype("float32")
        y = (x[:, 0] > 0).astype("int32")
        estimator = est.Estimator(linear_model_fn, model_dir={str(tmp_path / "model")!r}, params={{"n_classes": 2}},
                                  config=est.RunConfig(save_checkpoints_steps=100, log_step_count_steps=None))
        estimator.train(train_input(x, y), max_steps=1000, hooks=[{hook}])
        print("not reached")
    """))
    return program


def test_sigterm_saves_a_checkpoint_then_ends_the_process_by_sigterm(tmp_path):
    program = _training_program(tmp_path, "SignalAtStep(signal.SIGTERM, 23)")
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == -signal.SIGTERM, result.stderr[-3000:]
    assert "not reached" not in result.stdout
    assert tf.train.latest_checkpoint(str(tmp_path / "model")).endswith("model.ckpt-23")
    assert "SIGTERM received: stopping after this step and saving a checkpoint" in result.stderr


class BlockAtStep(tf.compat.v1.train.SessionRunHook):
    """At global step `step`, the session call waits on an empty queue: native code, as a step waiting for a
    parameter server that is gone does, where Python runs no signal handler until it returns."""

    def __init__(self, step):
        self.step, self.steps = step, 0

    def begin(self):
        self._dequeue = tf.queue.FIFOQueue(1, tf.float32, shapes=[[]]).dequeue()

    def before_run(self, run_context):
        self.steps += 1
        if self.steps == self.step:
            print("blocked", flush=True)
            return tf.compat.v1.train.SessionRunArgs(self._dequeue)
        return None


@pytest.mark.slow
def test_sigterm_during_a_native_call_ends_the_process_after_the_grace_time(tmp_path):
    """Slow: the 25 s grace time is what it tests."""
    program = _training_program(tmp_path, "BlockAtStep(5)")
    process = subprocess.Popen([sys.executable, str(program)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert process.stdout.readline().strip() == "blocked"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)  # before: it never ended (the handler waited for the call)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "did not finish within 25s of SIGTERM; stopping now" in stderr
