"""Which saver a training session restores and saves with, and what it knows of earlier checkpoints, as in
tf.estimator 2.15 (whose MonitoredTrainingSession restored from the model_dir through TensorFlow's SessionManager,
with the Scaffold's saver: the model's own, or the one in the graph's SAVERS collection).

The numbers are what tf.estimator 2.15 wrote for the same programs (TF 2.15.1, tensorflow-estimator 2.15.0)."""

import os

import pytest
import tensorflow as tf

import elastimator as est
from tests.unit.test_kept_training import KEPT, checkpoint_files


def _ones():
    return tf.data.Dataset.from_tensors(tf.ones([1])).repeat()


def _fit_one(features, labels, mode, params):
    w = tf.compat.v1.get_variable("w", [1], initializer=tf.zeros_initializer())
    loss = tf.reduce_sum((w - features) ** 2)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    hooks = [tf.compat.v1.train.SessionRunHook()] if params.get("with_a_model_hook") else []
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, training_hooks=hooks)


def _listed(model_dir) -> list[str]:
    return [os.path.basename(p) for p in tf.train.get_checkpoint_state(model_dir).all_model_checkpoint_paths]


@pytest.mark.parametrize("kept", [True, False], ids=["kept_graph", "graph_built_afresh"])
def test_keep_checkpoint_max_counts_the_checkpoints_of_an_earlier_call(tmp_path, caplog, kept):
    # A model hook keeps the graph from being kept (kept_training.keepable): the second call builds afresh.
    estimator = est.Estimator(_fit_one, model_dir=str(tmp_path), params={"with_a_model_hook": not kept},
                              config=est.RunConfig(save_checkpoints_steps=5, keep_checkpoint_max=3,
                                                   log_step_count_steps=None))
    with caplog.at_level("INFO", logger="elastimator"):
        estimator.train(_ones, steps=7)  # saves 0, 5 and 7
        estimator.train(_ones, steps=7)  # saves 7 again, 12 and 14
    assert (KEPT in caplog.text) == kept
    # 2.15 deleted 0 and 5 when it saved 12 and 14 (its restoring saver knew them); a saver that knew no
    # earlier checkpoint left both on disk, beyond keep_checkpoint_max.
    assert checkpoint_files(tmp_path) == ["model.ckpt-12.index", "model.ckpt-14.index", "model.ckpt-7.index"]
    assert _listed(tmp_path) == ["model.ckpt-7", "model.ckpt-12", "model.ckpt-14"]


def _own_saver(features, labels, mode, params):
    """A model that saves with its own Saver, kept in the SAVERS collection and given to its own
    CheckpointSaverHook (as mesh-tensorflow's MNIST example does), under names of its own."""
    w = tf.compat.v1.get_variable("w", [1], initializer=tf.zeros_initializer())
    loss = tf.reduce_sum((w - features) ** 2)
    step = tf.compat.v1.train.get_global_step()
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
    saver = tf.compat.v1.train.Saver({"renamed/w": w, "global_step": step}, sharded=True, max_to_keep=10)
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)
    hook = tf.compat.v1.train.CheckpointSaverHook(params["model_dir"], save_steps=5, saver=saver)
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, training_chief_hooks=[hook])


def test_a_training_session_restores_and_saves_with_the_saver_in_the_savers_collection(tmp_path):
    estimator = est.Estimator(_own_saver, model_dir=str(tmp_path), params={"model_dir": str(tmp_path)},
                              config=est.RunConfig(log_step_count_steps=None))
    estimator.train(_ones, steps=7)
    first = float(estimator.get_variable_value("renamed/w")[0])
    # Restored with the model's saver (elastimator's, looking for "w", found no such key and failed) ...
    estimator.train(_ones, steps=7)
    assert estimator.get_variable_value("global_step") == 14
    assert sorted(name for name, _ in tf.train.list_variables(str(tmp_path))) == ["global_step", "renamed/w"]
    assert float(estimator.get_variable_value("renamed/w")[0]) == pytest.approx(0.9560195, rel=1e-5) != first
    # ... which, told of the first call's checkpoints, lists them all, as 2.15's state file did.
    assert _listed(tmp_path) == ["model.ckpt-0", "model.ckpt-5", "model.ckpt-7", "model.ckpt-12", "model.ckpt-14"]
