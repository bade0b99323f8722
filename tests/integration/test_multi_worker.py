"""MultiWorkerMirroredStrategy over two worker processes, as TensorFlow's "Multi-worker training with Estimator"
tutorial runs it (TF_CONFIG with workers only, `train_and_evaluate`): the workers all-reduce, and the chief's
model is the one a single process trains on the global batch."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import free_ports

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multi_worker_program.py")

pytestmark = pytest.mark.slow


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, err[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _start(index, model_dir, ports, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, PROGRAM, str(index), str(model_dir), *map(str, ports)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))


def _workers_then_plain(tmp_path, env=None) -> tuple[dict, dict, dict]:
    """The results of the two workers, then of one process on the same global batches."""
    ports = free_ports(2)
    workers = [_start(i, tmp_path / "job", ports, env) for i in range(2)]
    try:
        chief, worker = [_result(p) for p in workers]
    finally:
        for p in workers:
            if p.poll() is None:
                p.kill()
    return chief, worker, _result(_start("plain", tmp_path / "plain", ports, env))


def _assert_trained_alike(chief: dict, plain: dict) -> None:
    assert chief["global_step"] == plain["global_step"] == 10
    np.testing.assert_allclose(chief["losses"], plain["losses"], rtol=1e-4)
    for name, value in plain["weights"].items():
        np.testing.assert_allclose(chief["weights"][name], value, rtol=1e-4, atol=1e-6)


def test_two_workers_all_reduce_into_the_model_one_process_trains_on_the_global_batch(tmp_path):
    chief, worker, plain = _workers_then_plain(tmp_path)
    assert chief["is_chief"] and not worker["is_chief"]
    assert chief["replicas"] == worker["replicas"] == 2
    # Each worker's input_fn got its pipeline: 2 pipelines, ids 0 and 1 (the tutorial's shard arguments).
    assert chief["input_contexts"] == [[2, 0]] and worker["input_contexts"] == [[2, 1]]
    _assert_trained_alike(chief, plain)


def test_inputs_that_end_at_different_steps_end_the_training_together(tmp_path):
    """Worker 1's input ends 3 batches before worker 0's (tf.estimator 2.15 hung there, worker 0 waiting in the
    all-reduce): both finish, worker 1 training its last batch again meanwhile, and the chief's model is the one a
    single process trains on those global batches."""
    chief, _, plain = _workers_then_plain(tmp_path, {"ELASTIMATOR_TEST_UNEVEN": "3"})
    _assert_trained_alike(chief, plain)


def test_a_worker_killed_mid_job_ends_the_others_with_what_to_do_and_a_restart_resumes(tmp_path):
    """A step waits on every worker: the survivors' step is cancelled once the dead one's server is gone (not
    waited on forever), they exit with a ClusterError, and the group started again resumes from the newest
    checkpoint and finishes."""
    ports = free_ports(2)
    env = {"ELASTIMATOR_TEST_SLOW_STEPS": "60"}
    workers = [_start(i, tmp_path / "job", ports, env) for i in range(2)]
    try:
        steps = 0
        for line in workers[1].stdout:  # worker 1 trains ~15 steps (a checkpoint at step 10), then dies
            steps += line.startswith("STEP")
            if steps >= 15:
                break
        workers[1].kill()
        out, err = workers[0].communicate(timeout=120)
    finally:
        for p in workers:
            if p.poll() is None:
                p.kill()
    assert workers[0].returncode != 0 and "RESULT" not in out, err[-2000:]
    # The dead worker is named where the peer watch noticed first, the collective's error where it aborted first.
    assert re.search(r"(stopped answering|a worker of the all-reduce went away \(.*\)), and a step of a strategy "
                     r"over several processes \(MultiWorkerMirroredStrategy\) needs every worker\. Start every "
                     r"worker again: each resumes from the newest checkpoint", err), err[-2000:]
    saved = sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(tmp_path / "job")
                   if name.startswith("model.ckpt-") and name.endswith(".index"))
    assert saved and saved[-1] >= 10
    ports = free_ports(2)
    restarted = [_start(i, tmp_path / "job", ports, env) for i in range(2)]
    chief, worker = [_result(p) for p in restarted]
    assert chief["global_step"] == 60 and chief["losses"][-1] < chief["losses"][0]
    assert not worker["is_chief"]
