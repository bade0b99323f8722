"""A damaged newest checkpoint is skipped for the newest one that reads whole, saying which and why."""

import glob
import logging
import os

import numpy as np
import pytest

import elastimator as est
from elastimator.estimator.saving import checkpoints
from tests.helpers import linear_model_fn

X = np.random.RandomState(0).rand(120, 4).astype("float32")
Y = (X[:, 0] * 3).astype("int64") % 3


def _input():
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=10, num_epochs=None, shuffle=True)


def _truncate_data(model_dir):
    data = glob.glob(os.path.join(model_dir, "model.ckpt-20.data-*"))[0]
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    return "model.ckpt-20: its .data holds"


def _garbage_state_file(model_dir):
    with open(os.path.join(model_dir, "checkpoint"), "wb") as f:
        f.write(b"\xff\xfe\x00 not a checkpoint state {{{")
    return "checkpoint is unreadable (UnicodeDecodeError"


def _lose_a_shard(model_dir):
    """As keep_checkpoint_max leaves a two-shard checkpoint (parameter servers save a shard each) half deleted."""
    data = glob.glob(os.path.join(model_dir, "model.ckpt-20.data-*"))[0]
    os.rename(data, data.replace("-of-00001", "-of-00002"))
    return "model.ckpt-20: it has 1 of its 2 .data files"


def _remove_index(model_dir):
    os.remove(os.path.join(model_dir, "model.ckpt-20.index"))
    return "model.ckpt-20: its index file model.ckpt-20.index is missing"


@pytest.mark.parametrize("damage", [_truncate_data, _garbage_state_file, _remove_index, _lose_a_shard],
                         ids=["truncated-data", "garbage-state-file", "missing-index", "missing-shard"])
def test_training_resumes_from_the_newest_checkpoint_that_reads_whole(tmp_path, caplog, damage):
    model_dir = str(tmp_path / "model")
    estimator = est.Estimator(linear_model_fn, model_dir=model_dir, params={"n_classes": 3},
                              config=est.RunConfig(save_checkpoints_steps=10, log_step_count_steps=None))
    estimator.train(_input(), max_steps=20)
    said = damage(model_dir)
    intact = 20 if damage is _garbage_state_file else 10
    with caplog.at_level(logging.DEBUG, logger="elastimator"):  # "Resuming from step" is a debug line
        assert checkpoints.global_step_of(estimator.latest_checkpoint()) == intact
        estimator.train(_input(), max_steps=30)
    assert said in caplog.text
    assert f"Resuming from step {intact}" in caplog.text
    assert estimator.latest_checkpoint() == os.path.join(model_dir, "model.ckpt-30")
    assert estimator.evaluate(est.inputs.numpy_input_fn({"x": X}, Y, shuffle=False))["global_step"] == 30
    if damage is _garbage_state_file:
        assert glob.glob(os.path.join(model_dir, "checkpoint.unreadable-*"))  # kept, not deleted


def test_a_kept_checkpoint_dir_warns_of_a_damaged_checkpoint_once_and_follows_its_files(tmp_path, caplog):
    """What a `CheckpointDir` found is its own: polled (as the evaluator polls), it warns once of a damaged
    checkpoint; another instance warns again; a checkpoint written anew under the same name is looked at anew."""
    model_dir = str(tmp_path / "model")
    estimator = est.Estimator(linear_model_fn, model_dir=model_dir, params={"n_classes": 3},
                              config=est.RunConfig(save_checkpoints_steps=10, log_step_count_steps=None))
    estimator.train(_input(), max_steps=20)
    data = glob.glob(os.path.join(model_dir, "model.ckpt-20.data-*"))[0]
    whole = open(data, "rb").read()
    _truncate_data(model_dir)
    polled = checkpoints.CheckpointDir(model_dir)
    with caplog.at_level(logging.WARNING, logger="elastimator"):
        assert [polled.newest() for _ in range(3)] == [os.path.join(model_dir, "model.ckpt-10")] * 3
        assert caplog.text.count("Skipping checkpoint") == 1
        assert checkpoints.CheckpointDir(model_dir).newest().endswith("model.ckpt-10")
        assert caplog.text.count("Skipping checkpoint") == 2
    with open(data, "wb") as f:  # the copy completed: the same name, whole again
        f.write(whole)
    assert polled.newest() == os.path.join(model_dir, "model.ckpt-20")
    assert checkpoints.CheckpointDir.stamp(polled.newest()) == checkpoints.CheckpointDir.stamp(polled.newest())
