"""SIGTERM during train() in a process of its own: the step finishes, a checkpoint is saved, then the process ends
by the signal; a step stuck in native code ends after the grace time."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

pytestmark = pytest.mark.integration


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
        from tests.helpers import BlockAtStep, SignalAtStep
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
