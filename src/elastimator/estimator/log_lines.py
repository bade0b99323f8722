"""The lines tf.estimator 2.15 printed through TensorFlow's logger, with 2.15's wording.

Programs and their log scrapers read these lines (`loss = 0.69, step = 0`, `Loss for final step: 0.41.`,
`Saving dict for global step 400: ...`), so they go where 2.15 sent them: TensorFlow's Python logger
("tensorflow"), shown when the program sets `tf.compat.v1.logging.set_verbosity(INFO)` and not otherwise, and
printed once under `logging.basicConfig` (`tensorflow_import`). Each is printed where 2.15 printed it; the lines
TensorFlow's own classes print (`Graph was finalized.`, `Saving checkpoints for N into ...`, `Restoring
parameters from ...`) come from those classes, as in 2.15. What only elastimator does (kept graphs, steps per
call, the shard service) it logs on its own logger, "elastimator".

Values are formatted as 2.15 formatted them: `%s` of the numpy scalar a session returned (float32's shortest
digits), not Python's float.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Iterator, Mapping

import tensorflow as tf

_info = tf.compat.v1.logging.info
_warning = tf.compat.v1.logging.warning


def shown() -> bool:
    """Whether TensorFlow's logger prints INFO lines now. Where it does not, elastimator logs the few lines the
    command line shows (training progress, an evaluation's results) on its own logger instead; never both."""
    return tf.get_logger().isEnabledFor(logging.INFO)


_CONFIG_FIELDS = (
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps", "save_checkpoints_secs",
    "session_config", "keep_checkpoint_max", "keep_checkpoint_every_n_hours", "log_step_count_steps",
    "train_distribute", "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs", "checkpoint_save_graph_def", "service",
    "cluster_spec", "task_type", "task_id", "global_id_in_cluster", "master", "evaluation_master", "is_chief",
    "num_ps_replicas", "num_worker_replicas")
"""The RunConfig properties 2.15's `Using config: {...}` line showed, in its order (as `_name` keys)."""

_METHODS = (("tensorflow/serving/classify", "Classify"), ("tensorflow/serving/regress", "Regress"),
            ("tensorflow/serving/predict", "Predict"), ("tensorflow/supervised/training", "Train"),
            ("tensorflow/supervised/eval", "Eval"))
"""Signature method names and the names 2.15's export report gave them, in its order."""


def using_default_config() -> None:
    """An Estimator made without a `config`."""
    _info("Using default config.")


def using_config(config) -> None:
    """An Estimator made: its config, as 2.15 showed it (a dict of `_name` keys; the session config in effect)."""
    shown = {}
    for name in _CONFIG_FIELDS:
        if name == "session_config":
            shown["_session_config"] = config.effective_session_config()
        elif hasattr(config, name):
            shown[f"_{name}"] = getattr(config, name)
    _info("Using config: %s", str(shown))


def temporary_model_dir(path: str) -> None:
    _warning("Using temporary folder as model directory: %s", path)


@contextlib.contextmanager
def calling_model_fn() -> Iterator[None]:
    """Around each call of a model_fn (one per replica of a strategy)."""
    _info("Calling model_fn.")
    yield
    _info("Done calling model_fn.")


@contextlib.contextmanager
def running_local_init_op() -> Iterator[None]:
    """Around the run of a local init op outside TensorFlow's SessionManager (which prints these itself)."""
    _info("Running local_init_op.")
    yield
    _info("Done running local_init_op.")


def skipping_training() -> None:
    _info("Skipping training since max_steps has already saved.")


def loss_at_step(loss, step, elapsed_secs: float | None) -> None:
    """The training progress line (2.15's default LoggingTensorHook): `elapsed_secs` since the last one, or None
    for the first of a train call."""
    if elapsed_secs is None:
        _info("loss = %s, step = %s", loss, step)
    else:
        _info("loss = %s, step = %s (%.3f sec)", loss, step, elapsed_secs)


def final_loss(loss) -> None:
    _info("Loss for final step: %s.", loss)


class EvaluationLog:
    """An evaluation's start, inference time and end lines; `start` prints once, when the evaluation's session
    is about to be made or its kept graph restored."""

    def __init__(self):
        self._started: float | None = None

    def start(self) -> None:
        if self._started is None:
            self._started = time.time()
            _info("Starting evaluation at " + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()))

    def finish(self) -> None:
        self.start()
        _info("Inference Time : {:0.5f}s".format(time.time() - self._started))
        _info("Finished evaluation at " + time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime()))


def saving_dict(step: int, results: Mapping[str, object]) -> None:
    """An evaluation's results (strings left out), sorted by name."""
    _info("Saving dict for global step %d: %s", step,
          ", ".join("%s = %s" % (k, v) for k, v in sorted(results.items()) if not isinstance(v, bytes)))


def saving_checkpoint_path(step: int, checkpoint: str) -> None:
    _info("Saving '%s' summary for global step %d: %s", "checkpoint_path", step, checkpoint)


def signatures_included(signature_defs: Mapping[str, object]) -> None:
    """The signatures of one exported MetaGraph, by method, and a warning where none is the default one."""
    by_method: dict[str, list[str]] = {method: [] for method, _ in _METHODS}
    for name, signature in signature_defs.items():
        by_method.setdefault(signature.method_name, []).append(name)
    friendly = dict(_METHODS)
    for method, names in by_method.items():
        _info("Signatures INCLUDED in export for {}: {}".format(friendly.get(method, method), names or "None"))
    if not signature_defs:
        _warning("Export includes no signatures!")
    elif tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY not in signature_defs:
        _warning("Export includes no default signature!")


def train_and_evaluate_locally(config) -> None:
    """`train_and_evaluate` in one process."""
    _info("Not using Distribute Coordinator.")
    _info("Running training and evaluation locally (non-distributed).")
    _info("Start train and evaluate loop. The evaluate will happen after every checkpoint. Checkpoint frequency "
          "is determined based on RunConfig arguments: save_checkpoints_steps {} or save_checkpoints_secs {}."
          .format(config.save_checkpoints_steps, config.save_checkpoints_secs))
