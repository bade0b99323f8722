"""Checkpoints in a model_dir: finding, validating, reading and writing them."""

from __future__ import annotations

import logging
import os

import tensorflow as tf

from elastimator.errors import CheckpointError, ModelDirError

logger = logging.getLogger("elastimator")
CHECKPOINT_PREFIX = "model.ckpt"


def check_model_dir(model_dir: str) -> str:
    """Returns `model_dir`, raising if it exists but is not a directory."""
    if tf.io.gfile.exists(model_dir) and not tf.io.gfile.isdir(model_dir):
        raise ModelDirError(
            f"model_dir {model_dir!r} exists and is a file; expected a directory for checkpoints and "
            "events. Pass a directory path (a new one is created), or move the file away."
        )
    return model_dir


def latest_checkpoint(model_dir: str) -> str | None:
    """The newest checkpoint prefix in `model_dir`, or None."""
    if not tf.io.gfile.isdir(model_dir):
        return None
    return tf.train.latest_checkpoint(model_dir)


def exists(prefix: str) -> bool:
    """Whether a V2 checkpoint with this prefix is on disk."""
    return tf.io.gfile.exists(prefix + ".index")


def resolve(checkpoint_path: str | None, model_dir: str) -> str | None:
    """The checkpoint to read: `checkpoint_path` (a prefix or a directory) or the newest in model_dir.

    Raises:
        CheckpointError: when `checkpoint_path` was given but names no checkpoint.
    """
    if checkpoint_path is None:
        return latest_checkpoint(model_dir)
    if tf.io.gfile.isdir(checkpoint_path):
        found = tf.train.latest_checkpoint(checkpoint_path)
        if found is None:
            raise CheckpointError(
                f"checkpoint_path {checkpoint_path!r} is a directory with no checkpoint in it. "
                "Pass a checkpoint prefix such as <model_dir>/model.ckpt-1000, or train first."
            )
        return found
    if not exists(checkpoint_path):
        available = all_checkpoints(model_dir)
        hint = f"Checkpoints in {model_dir!r}: {available}." if available else f"{model_dir!r} has no checkpoints."
        raise CheckpointError(
            f"checkpoint_path {checkpoint_path!r} does not exist (no {checkpoint_path}.index). "
            f"Expected a checkpoint prefix like <model_dir>/model.ckpt-<step>. {hint}"
        )
    return checkpoint_path


def resolve_for_reading(checkpoint_path: str | None, model_dir: str, purpose: str) -> str | None:
    """Like `resolve`, logging that an initialized model is used when model_dir has no checkpoint."""
    checkpoint = resolve(checkpoint_path, model_dir)
    if checkpoint is None:
        logger.warning("No checkpoint in %s: %s with a freshly initialized model.", model_dir, purpose)
    return checkpoint


def all_checkpoints(model_dir: str) -> list[str]:
    """All checkpoint prefixes the model_dir's state file lists, oldest first."""
    if not tf.io.gfile.isdir(model_dir):
        return []
    state = tf.train.get_checkpoint_state(model_dir)
    return list(state.all_model_checkpoint_paths) if state else []


def global_step_of(checkpoint: str | None) -> int:
    """The global step stored in a checkpoint (0 for none)."""
    if checkpoint is None:
        return 0
    try:
        return int(tf.train.load_variable(checkpoint, tf.compat.v1.GraphKeys.GLOBAL_STEP))
    except (tf.errors.NotFoundError, ValueError):
        return 0


def step_of_path(checkpoint: str) -> int:
    """The step in a checkpoint's file name (model.ckpt-<step>), which is what the saver was told."""
    try:
        return int(checkpoint.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        raise CheckpointError(f"{checkpoint!r} is not named <prefix>-<step>.") from None


def make_saver(config) -> tf.compat.v1.train.Saver:
    """The Saver every Estimator graph uses: relative paths, retention from RunConfig."""
    return tf.compat.v1.train.Saver(
        sharded=True,
        max_to_keep=config.keep_checkpoint_max or None,
        keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours,
        defer_build=True,
        save_relative_paths=True,
    )


def checkpoint_path(model_dir: str) -> str:
    return os.path.join(model_dir, CHECKPOINT_PREFIX)
