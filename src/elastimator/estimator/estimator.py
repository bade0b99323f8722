"""`Estimator`: train, evaluate, predict and export a `model_fn`."""

from __future__ import annotations

import copy
import tempfile
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import tensorflow as tf

from elastimator.errors import CheckpointError, ConfigError, ModelDirError, ModelFnError
from elastimator.estimator import log_lines
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.run_config import RunConfig
from elastimator.estimator.contract.warm_start import WarmStartSettings
from elastimator.estimator.graph import calls
from elastimator.estimator.loops import evaluate_loop, predict_loop, train_loop
from elastimator.estimator.loops.predictor import Predictor
from elastimator.estimator.loops.warm_graphs import WarmGraphs
from elastimator.estimator.private_members import PrivateMembers
from elastimator.estimator.saving import checkpoints, exporting



class Estimator(PrivateMembers):
    """Trains, evaluates, predicts with and exports a model defined by `model_fn`.

    Each call builds a fresh graph, calls `input_fn` and then `model_fn`, and
    runs a monitored session; everything that must survive lives in
    `model_dir`, laid out as tf.estimator laid it out. The private members
    frameworks built on tf.estimator use are 2.15's (`PrivateMembers`).

    Args:
        model_fn: `model_fn(features, labels, mode, params, config)` (any subset
            that includes `features`) returning an `EstimatorSpec`. A subclass may
            instead define a `model_fn` method and pass None.
        model_dir: Directory for checkpoints, events and exports. A temporary
            directory when neither this nor `config.model_dir` is set.
        config: A `RunConfig`.
        params: Hyperparameters passed to model_fn (a deep copy per call).
        warm_start_from: A checkpoint path or `WarmStartSettings` to initialize
            a model that has no checkpoint yet.

    Example:
        >>> estimator = Estimator(model_fn, model_dir="/tmp/model")
        >>> estimator.train(train_input_fn, max_steps=1000)
        >>> metrics = estimator.evaluate(eval_input_fn)
    """

    def __init__(
        self,
        model_fn: Callable | None,
        model_dir: str | None = None,
        config: RunConfig | None = None,
        params: Mapping[str, Any] | None = None,
        warm_start_from: str | WarmStartSettings | None = None,
    ):
        default_config = config is None
        if default_config:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ConfigError(f"config must be an elastimator.RunConfig; got {type(config).__name__}.")
        if params is not None and not isinstance(params, Mapping):
            raise ConfigError(f"params must be a dict or None; got {type(params).__name__}.")
        if default_config:
            log_lines.using_default_config()
        model_dir = _resolve_model_dir(model_dir, config)
        if model_fn is None:
            # A subclass may define model_fn(self, features, labels, mode, params) as a method.
            if type(self).model_fn is Estimator.model_fn:
                raise ModelFnError("Estimator needs a model_fn, or a subclass that defines a model_fn method.")
            model_fn = getattr(self, "model_fn")
        calls.check_model_fn(model_fn, params)
        self._model_fn = model_fn
        self._params = dict(params or {})
        self._config = config.replace(model_dir=model_dir)
        self._model_dir = model_dir
        log_lines.using_config(self._config)
        self._warm_start = WarmStartSettings.of(warm_start_from)
        self._warm_graphs = WarmGraphs()
        """Evaluation and prediction graphs kept for the next call (`RunConfig.reuse_graphs`)."""
        self.last_train_loss: float | None = None
        """Loss of the last step the most recent `train` call ran (None before any)."""

    # --- properties -------------------------------------------------------------------------

    @property
    def model_fn(self) -> Callable:
        """The model function, called with the arguments it accepts."""
        return self._model_fn

    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        return self._config

    @property
    def run_config(self):
        """The config, under the name DLRover adaptors use; an adaptor may set it (`self.run_config = config`)."""
        return self.__dict__.get("_run_config", self.__dict__.get("_config"))

    @run_config.setter
    def run_config(self, value) -> None:
        # tf.estimator had no such attribute, so a subclass setting it (even before __init__) owns the value.
        self.__dict__["_run_config"] = value

    @property
    def params(self) -> dict:
        """A copy of the hyperparameters (changing it does not change the Estimator)."""
        return copy.deepcopy(self._params)

    def _params_for(self, mode: str) -> dict:
        """The params input_fn and model_fn get when training, evaluating or predicting in `mode` (TPUEstimator
        adds its batch size of that mode); exports get `params`."""
        del mode
        return self.params

    @property
    def warm_start_settings(self) -> WarmStartSettings | None:
        return self._warm_start

    # --- the verbs --------------------------------------------------------------------------

    def train(
        self,
        input_fn: Callable,
        hooks: Sequence[tf.compat.v1.train.SessionRunHook] | None = None,
        steps: int | None = None,
        max_steps: int | None = None,
        saving_listeners: Sequence[tf.compat.v1.train.CheckpointSaverListener] | None = None,
    ) -> "Estimator":
        """Trains the model; resumes from the newest checkpoint in model_dir.

        Args:
            input_fn: Returns a `tf.data.Dataset` of (features, labels), or a
                (features, labels) tuple.
            hooks: Extra `SessionRunHook`s.
            steps: Train this many more steps (or until input ends).
            max_steps: Train until the global step reaches this; returns at
                once if the checkpoint is already there. Exclusive with `steps`.
            saving_listeners: `CheckpointSaverListener`s run around each save.

        Returns:
            self, so calls can chain.

        Raises:
            NanLossError: the loss became NaN; the last good checkpoint stays.
        """
        self.last_train_loss = train_loop.train(self, input_fn, hooks, steps, max_steps, saving_listeners)
        return self

    def evaluate(
        self,
        input_fn: Callable,
        steps: int | None = None,
        hooks: Sequence | None = None,
        checkpoint_path: str | None = None,
        name: str | None = None,
    ) -> dict:
        """Evaluates the newest (or given) checkpoint on `input_fn`.

        Returns:
            Metrics by name, including "loss" (mean over batches) and "global_step".
            They are also written as events to `eval_dir(name)`.
        """
        return evaluate_loop.evaluate(self, input_fn, steps, hooks, checkpoint_path, name)

    def predict(
        self,
        input_fn: Callable,
        predict_keys: str | Sequence[str] | None = None,
        hooks: Sequence | None = None,
        checkpoint_path: str | None = None,
        yield_single_examples: bool = True,
    ) -> Iterator:
        """Yields predictions (one per example, or per batch) from the newest checkpoint."""
        return predict_loop.predict(self, input_fn, predict_keys, hooks, checkpoint_path, yield_single_examples)

    def predictor(
        self,
        serving_input_receiver_fn: Callable,
        checkpoint_path: str | None = None,
        predict_keys: str | Sequence[str] | None = None,
    ) -> "Predictor":
        """A model loaded once and kept warm: each call is one session run (see `Predictor`)."""
        return Predictor(self, serving_input_receiver_fn, checkpoint_path, predict_keys)

    def export_saved_model(
        self,
        export_dir_base: str,
        serving_input_receiver_fn: Callable,
        assets_extra: Mapping[str, str] | None = None,
        as_text: bool = False,
        checkpoint_path: str | None = None,
        experimental_mode: str = ModeKeys.PREDICT,
    ) -> bytes:
        """Exports a SavedModel under `export_dir_base/<timestamp>/`; returns its path as bytes."""
        return exporting.export_saved_model(
            self, export_dir_base, serving_input_receiver_fn, assets_extra, as_text, checkpoint_path,
            experimental_mode,
        )

    def experimental_export_all_saved_models(
        self,
        export_dir_base: str,
        input_receiver_fn_map: Mapping[str, Callable],
        assets_extra: Mapping[str, str] | None = None,
        as_text: bool = False,
        checkpoint_path: str | None = None,
    ) -> bytes:
        """Exports one SavedModel holding a graph per mode of `input_receiver_fn_map` ({ModeKeys.TRAIN:
        supervised receiver fn, ModeKeys.EVAL: ..., ModeKeys.PREDICT: serving receiver fn}), tagged `train`,
        `eval` and `serve`, over one copy of the variables; returns its path as bytes."""
        return exporting.export_all_saved_models(self, export_dir_base, input_receiver_fn_map, assets_extra,
                                                 as_text, checkpoint_path)

    def export_savedmodel(self, export_dir_base, serving_input_receiver_fn, assets_extra=None,
                          as_text=False, checkpoint_path=None, strip_default_attrs=False) -> bytes:
        """The TF1 spelling of `export_saved_model`; `strip_default_attrs=True` leaves out attributes that have
        their default values (smaller graphs that older TensorFlow versions can still load)."""
        return exporting.export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra, as_text,
                                            checkpoint_path, strip_default_attrs=strip_default_attrs)

    # --- reading the model_dir --------------------------------------------------------------

    def latest_checkpoint(self) -> str | None:
        """The newest checkpoint prefix in model_dir, or None."""
        return checkpoints.CheckpointDir(self._model_dir).newest()

    def eval_dir(self, name: str | None = None) -> str:
        """Where `evaluate(name=name)` writes its events."""
        return evaluate_loop.eval_dir(self._model_dir, name)

    def get_variable_names(self) -> list[str]:
        """Names of the variables in the newest checkpoint."""
        return [name for name, _ in tf.train.list_variables(self._require_checkpoint())]

    def get_variable_value(self, name: str) -> np.ndarray:
        """The value of variable `name` in the newest checkpoint."""
        checkpoint = self._require_checkpoint()
        try:
            return tf.train.load_variable(checkpoint, name)
        except (tf.errors.NotFoundError, ValueError):
            names = [n for n, _ in tf.train.list_variables(checkpoint)]
            raise VariableNotFoundError(
                f"Variable {name!r} is not in checkpoint {checkpoint}. It has: {names[:20]}"
                f"{' ...' if len(names) > 20 else ''}."
            ) from None

    def _require_checkpoint(self) -> str:
        checkpoint = self.latest_checkpoint()
        if checkpoint is None:
            raise CheckpointError(f"No checkpoint in model_dir {self._model_dir!r}; train the estimator first.")
        return checkpoint


class VariableNotFoundError(CheckpointError, tf.errors.NotFoundError):
    """`get_variable_value` of a name the checkpoint lacks: a CheckpointError, and the `tf.errors.NotFoundError`
    tf.estimator 2.15 raised there."""

    def __init__(self, message: str):
        tf.errors.NotFoundError.__init__(self, None, None, message)


def _resolve_model_dir(model_dir: str | None, config: RunConfig) -> str:
    if model_dir is not None and not isinstance(model_dir, str):
        if hasattr(model_dir, "__fspath__"):
            model_dir = str(model_dir)
        else:
            raise ModelDirError(f"model_dir must be a path string; got {type(model_dir).__name__}.")
    if model_dir and config.model_dir and model_dir != config.model_dir:
        raise ConfigError(
            f"model_dir={model_dir!r} differs from config.model_dir={config.model_dir!r}. "
            "Set it in one place, or make them equal."
        )
    resolved = model_dir or config.model_dir
    if not resolved:
        resolved = tempfile.mkdtemp(prefix="elastimator-")
        log_lines.temporary_model_dir(resolved)
    return checkpoints.check_model_dir(resolved)
