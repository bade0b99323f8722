"""`RunConfig(train_distribute=..., eval_distribute=...)` over two logical CPUs in one process: the replicas train
as one model would on their batches together (the same loss at every step, the same weights), the checkpoint
restores without the strategy, evaluating over the replicas gives one device's metrics, and what is not built is
refused with what to do. Each case runs replicas_program.py in a process of
its own (logical devices are made before TensorFlow starts)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replicas_program.py")

pytestmark = pytest.mark.slow


def run(kind, tmp_path, strategy="mirrored"):
    process = subprocess.run([sys.executable, PROGRAM, kind, str(tmp_path), strategy], capture_output=True,
                             text=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    lines = [line for line in process.stdout.splitlines() if line.startswith("RESULT ")]
    assert process.returncode == 0 and lines, process.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("kind,strategy", [
    ("custom", "mirrored"),  # the default cross-device ops, on which 2.15 hung in the first step over CPUs
    ("custom", "central_storage"),
    ("canned", "mirrored"),  # a tf-keras optimizer: the head's mean loss divided by the replicas
    ("canned_v1", "mirrored_v1"),  # losses summed over the batch: no division
])
def test_two_replicas_train_as_one_model_on_their_batches_together(tmp_path, kind, strategy):
    result = run(kind, tmp_path, strategy)
    plain, replicas = result["plain"], result["replicas"]
    assert result["replica_count"] == 2
    assert replicas["global_step"] == plain["global_step"] == 12
    assert len(replicas["losses"]) == len(plain["losses"]) == 12
    np.testing.assert_allclose(replicas["losses"], plain["losses"], rtol=1e-4)
    assert replicas["weights"].keys() == plain["weights"].keys()
    for name, value in plain["weights"].items():
        np.testing.assert_allclose(replicas["weights"][name], value, rtol=1e-4, atol=1e-6)
    # Evaluated by a plain Estimator: the replicas' checkpoint restored without the strategy.
    assert replicas["eval_loss"] == pytest.approx(plain["eval_loss"], rel=1e-4)
    assert replicas["eval_loss"] < replicas["losses"][0] / 4  # it learned
    # Evaluated over the replicas (eval_distribute), a batch of 4 each per step: one device's metrics on those
    # batches.
    over_replicas, one_device = result["eval_over_replicas"], result["eval_one_device"]
    assert over_replicas.keys() == one_device.keys() and {"loss", "global_step"} <= over_replicas.keys()
    for key, value in one_device.items():
        assert over_replicas[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    # The input_fn was called once for the replicas, with 2.15's input context (2 replicas, pipeline 0 of 1).
    assert [2, 0, 1] in result["input_contexts"]


def test_every_canned_head_evaluates_over_replicas_as_on_one_device(tmp_path):
    """`eval_distribute` over two replicas refused the binary head's own accuracy_baseline (a value derived per
    replica from an aggregated mean); every head's metrics must be one device's on the same batches."""
    said = run("heads", tmp_path)
    assert sorted(said) == ["binary", "logistic", "multi_class", "multi_head", "multi_label", "poisson",
                            "regression"]
    for head, result in said.items():
        over, one = result["over_replicas"], result["one_device"]
        assert over.keys() == one.keys() and {"loss", "global_step"} <= over.keys(), head
        for key, value in one.items():
            assert over[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (head, key)
        assert result["prediction_keys"] and result["exported"], head
    assert "accuracy_baseline" in said["binary"]["one_device"]


def test_what_two_replicas_do_not_train_is_refused_with_what_to_do(tmp_path):
    said = run("refusals", tmp_path)
    assert said["input_fn_not_a_dataset"][0] == "InputFnError"
    assert "it must return a tf.data.Dataset" in said["input_fn_not_a_dataset"][1]
    assert said["embedding_variables"][0] == "ConfigError"
    assert "a strategy does not mirror embedding variables" in said["embedding_variables"][1]
    assert "Train them with parameter servers" in said["embedding_variables"][1]
    assert said["steps_per_execution"] == [
        "ConfigError", "RunConfig: steps_per_execution=4 with train_distribute over 2 replicas; a strategy's "
        "replicas run one step per session call. Leave steps_per_execution None (or 1)."]
