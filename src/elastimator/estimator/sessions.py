"""Scaffolds and session creators shared by the verbs."""

from __future__ import annotations

import tensorflow as tf

from elastimator.estimator import checkpoints


def make_scaffold(spec, config) -> tf.compat.v1.train.Scaffold:
    """The user's scaffold, with elastimator's saver filled in when it has none."""
    user = spec.scaffold
    if user is not None and user.saver is not None:
        return user
    return tf.compat.v1.train.Scaffold(saver=checkpoints.make_saver(config), copy_from_scaffold=user)


def training_session_creator(scaffold, config, model_dir: str):
    """Chief (or single) processes initialize or restore from model_dir; workers wait for the chief."""
    session_config = config.effective_session_config()
    if config.is_chief:
        return tf.compat.v1.train.ChiefSessionCreator(
            scaffold=scaffold, master=config.master, config=session_config, checkpoint_dir=model_dir
        )
    return tf.compat.v1.train.WorkerSessionCreator(
        scaffold=scaffold, master=config.master, config=session_config,
        max_wait_secs=config.session_creation_timeout_secs,
    )


def restoring_session_creator(spec, config, checkpoint: str | None, master: str):
    """A session that restores `checkpoint` (or initializes, when None) for evaluation or prediction."""
    return tf.compat.v1.train.ChiefSessionCreator(
        scaffold=make_scaffold(spec, config), master=master,
        config=config.effective_session_config(), checkpoint_filename_with_path=checkpoint,
    )
