"""`WarmStartSettings`: start a new model from another model's checkpoint."""

from __future__ import annotations

import tensorflow as tf

from elastimator._records import record_type
from elastimator.errors import CheckpointError, ConfigError

VocabInfo = tf.compat.v1.train.VocabInfo


_FIELDS = ("ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info", "var_name_to_prev_var_name")


class WarmStartSettings(record_type("WarmStartSettings", _FIELDS)):
    """Which variables to initialize from which checkpoint when training starts fresh.

    Applied only when model_dir has no checkpoint yet; afterwards training
    resumes from model_dir as usual.

    Args:
        ckpt_to_initialize_from: a checkpoint prefix, or a directory whose newest checkpoint is used.
        vars_to_warm_start: regex (or list of names/variables) of trainable variables to warm-start; None for none.
        var_name_to_vocab_info: variables whose rows follow a vocabulary that changed (tf.compat.v1.train.VocabInfo).
        var_name_to_prev_var_name: new variable name -> its name in the old checkpoint, for renamed variables.

    Example:
        >>> WarmStartSettings("/models/base", vars_to_warm_start="dense.*")
    """

    __slots__ = ()

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*", var_name_to_vocab_info=None,
                var_name_to_prev_var_name=None):
        if not isinstance(ckpt_to_initialize_from, str) or not ckpt_to_initialize_from:
            raise ConfigError(
                "WarmStartSettings: ckpt_to_initialize_from must be a checkpoint path or directory; "
                f"got {ckpt_to_initialize_from!r}."
            )
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start, dict(var_name_to_vocab_info or {}),
                               dict(var_name_to_prev_var_name or {}))

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
