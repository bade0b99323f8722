"""The shard service's reading of a model_dir without TensorFlow (elastic/model_dir_files.py) agrees with the
engine's (estimator/saving/checkpoints.py) on which checkpoint a job resumes from."""

import os

import tensorflow as tf

from elastimator.elastic import model_dir_files
from elastimator.estimator import CheckpointDir


def _save(model_dir, steps):
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("w", [2], initializer=tf.compat.v1.zeros_initializer())
        saver = tf.compat.v1.train.Saver(max_to_keep=10)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for step in steps:
                saver.save(session, os.path.join(model_dir, "model.ckpt"), global_step=step)


def _both(model_dir):
    return model_dir_files.newest_saved_step(str(model_dir)), CheckpointDir(str(model_dir)).newest_saved_step()


def test_the_newest_saved_step_is_the_engines_without_tensorflow(tmp_path):
    assert _both(tmp_path / "absent") == (None, None)
    assert _both(tmp_path) == (None, None)
    _save(str(tmp_path), [10, 20])
    assert _both(tmp_path) == (20, 20)
    # Rolled back: the state file names the older checkpoint, and the job resumes from it.
    tf.compat.v1.train.update_checkpoint_state(str(tmp_path), str(tmp_path / "model.ckpt-10"))
    assert _both(tmp_path) == (10, 10)
    # A state file that cannot be read: the checkpoint files decide.
    (tmp_path / "checkpoint").write_bytes(b"\xff\xfe not a state file")
    assert _both(tmp_path) == (20, 20)
    # A state file naming a checkpoint whose files are gone: the newest on disk.
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-30"\n')
    assert _both(tmp_path) == (20, 20)


def test_a_seal_is_written_whole_or_not_at_all(tmp_path):
    path = str(tmp_path / "shards" / "seal-5.json")
    model_dir_files.write_text_atomically(path, '{"a": 1}')
    model_dir_files.write_text_atomically(path, '{"a": 2}')
    assert model_dir_files.read_text(path) == '{"a": 2}'
    assert os.listdir(tmp_path / "shards") == ["seal-5.json"]
