"""`WarmStartSettings`: start a new model from another model's checkpoint."""

from __future__ import annotations

import dataclasses
from typing import Mapping

import tensorflow as tf

from elastimator.errors import CheckpointError, ConfigError

VocabInfo = tf.compat.v1.train.VocabInfo


@dataclasses.dataclass(frozen=True, kw_only=True)
class WarmStartSettings:
    """Which variables to initialize from which checkpoint when training starts fresh.

    Applied only when model_dir has no checkpoint yet; afterwards training
    resumes from model_dir as usual.

    Example:
        >>> WarmStartSettings(ckpt_to_initialize_from="/models/base", vars_to_warm_start="dense.*")
    """

    ckpt_to_initialize_from: str
    """A checkpoint prefix, or a directory whose newest checkpoint is used."""
    vars_to_warm_start: str | list | None = ".*"
    """Regex (or list of names/variables) of trainable variables to warm-start; None for none."""
    var_name_to_vocab_info: Mapping[str, VocabInfo] = dataclasses.field(default_factory=dict)
    """Variables whose rows follow a vocabulary that changed (see tf.compat.v1.train.VocabInfo)."""
    var_name_to_prev_var_name: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """New variable name -> its name in the old checkpoint, for renamed variables."""

    def __post_init__(self) -> None:
        if not isinstance(self.ckpt_to_initialize_from, str) or not self.ckpt_to_initialize_from:
            raise ConfigError(
                "WarmStartSettings: ckpt_to_initialize_from must be a checkpoint path or directory; "
                f"got {self.ckpt_to_initialize_from!r}."
            )

    @classmethod
    def of(cls, warm_start_from) -> "WarmStartSettings | None":
        """Accepts what Estimator(warm_start_from=...) accepts: None, a path, or settings."""
        if warm_start_from is None or isinstance(warm_start_from, WarmStartSettings):
            return warm_start_from
        if isinstance(warm_start_from, (str, bytes)):
            path = warm_start_from.decode() if isinstance(warm_start_from, bytes) else warm_start_from
            return cls(ckpt_to_initialize_from=path)
        raise ConfigError(
            f"warm_start_from must be a checkpoint path or a WarmStartSettings; got {type(warm_start_from).__name__}."
        )

    def resolved_checkpoint(self) -> str:
        path = self.ckpt_to_initialize_from
        if tf.io.gfile.isdir(path):
            found = tf.train.latest_checkpoint(path)
            if found is None:
                # A SavedModel export keeps its weights under variables/.
                saved_vars = f"{path.rstrip('/')}/variables/variables"
                if tf.io.gfile.exists(saved_vars + ".index"):
                    return saved_vars
                raise CheckpointError(f"warm_start_from directory {path!r} has no checkpoint to warm-start from.")
            return found
        if not tf.io.gfile.exists(path + ".index"):
            raise CheckpointError(
                f"warm_start_from checkpoint {path!r} does not exist; expected a checkpoint prefix or a directory."
            )
        return path

    def apply(self) -> None:
        """Overrides the initializers of the current graph's matching variables."""
        tf.compat.v1.train.warm_start(
            ckpt_to_initialize_from=self.resolved_checkpoint(),
            vars_to_warm_start=self.vars_to_warm_start,
            var_name_to_vocab_info=dict(self.var_name_to_vocab_info),
            var_name_to_prev_var_name=dict(self.var_name_to_prev_var_name),
        )
