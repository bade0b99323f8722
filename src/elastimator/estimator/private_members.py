"""tf.estimator 2.15's private `Estimator` members that frameworks built on it read, call or override.

AdaNet, EasyRec, TF-Ranking and DLRover subclass Estimator and reach past its public API: they read
`self._config`, build graphs of their own with `self._create_and_assert_global_step(graph)` and
`self._call_model_fn(features, labels, mode, config)`, and export with `self._export_all_saved_models`.
These members keep 2.15's names, arguments and results (`migrate/surface.py` lists them, with who uses
each); the engine calls `_call_model_fn` as 2.15 did, so a subclass that overrides it (or a program that
patches it) sees every model_fn call.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

import tensorflow as tf

from elastimator.errors import ModelFnError
from elastimator.estimator.graph import calls
from elastimator.estimator.loops import hooks as engine_hooks
from elastimator.estimator.saving import exporting

logger = logging.getLogger("elastimator")


class _Derived:
    """An attribute read from the Estimator's state unless the instance set its own (a subclass may assign it,
    before or after `Estimator.__init__`, as 2.15's subclasses did): a descriptor without `__set__`, so the
    instance's own value wins."""

    def __init__(self, read):
        self._read = read
        self.__doc__ = read.__doc__

    def __get__(self, instance, owner=None):
        return self if instance is None else self._read(instance)


class PrivateMembers:
    """Mixed into `Estimator`: 2.15's private members, on the state elastimator's Estimator keeps."""

    # What __init__ sets in elastimator's Estimator: _model_fn, _params, _config, _model_dir, _warm_start.

    _session_config = _Derived(lambda self: self._config.session_config)
    _train_distribution = _Derived(lambda self: self._config.train_distribute)
    _eval_distribution = _Derived(lambda self: self._config.eval_distribute)
    _device_fn = _Derived(lambda self: self._config.effective_device_fn())
    _warm_start_settings = _Derived(lambda self: self._warm_start)

    def _create_global_step(self, graph: tf.Graph):
        """Creates the global step in `graph` (an override may create its own)."""
        return tf.compat.v1.train.create_global_step(graph)

    def _create_and_assert_global_step(self, graph: tf.Graph):
        """`_create_global_step(graph)`, checked to be the graph's int64 global step.

        Raises:
            ModelFnError: when the step made is not the graph's global step or not int64.
        """
        step = self._create_global_step(graph)
        if step is not None:
            if step is not tf.compat.v1.train.get_global_step(graph):
                raise ModelFnError("_create_global_step must create the graph's global step (the one "
                                   "tf.compat.v1.train.get_global_step returns); it made another variable.")
            if step.dtype.base_dtype != tf.int64:
                raise ModelFnError(f"The global step must be int64; _create_global_step made a {step.dtype.name}.")
        return step

    def _call_input_fn(self, input_fn: Callable, mode: str, input_context=None):
        """Calls `input_fn` with the arguments it takes; returns what it returned."""
        return calls.input_fn_result(input_fn, mode, self._params_for(mode), self.config, input_context)

    def _get_features_and_labels_from_input_fn(self, input_fn: Callable, mode: str):
        """(features, labels, input_hooks) of `input_fn`'s result (a dataset is iterated)."""
        result = calls.call_input_fn(input_fn, mode, self._params_for(mode), self.config)
        return result.features, result.labels, list(result.hooks)

    def _get_features_from_input_fn(self, input_fn: Callable, mode: str):
        """(features, input_hooks); labels the input_fn returned are ignored, with a warning (as in 2.15)."""
        features, labels, hooks = self._get_features_and_labels_from_input_fn(input_fn, mode)
        if labels is not None:
            logger.warning("input_fn returned labels, which are ignored in %s mode.", mode)
        return features, hooks

    def _call_model_fn(self, features: Any, labels: Any, mode: str, config):
        """Calls the model_fn with the arguments it takes and checks it returned an EstimatorSpec of `mode`."""
        return calls.call_model_fn(self._model_fn, features, labels, mode, self._params_for(mode), config)

    _call_model_fn.elastimator_default = True  # type: ignore[attr-defined]  # told apart from an override

    def _convert_train_steps_to_hooks(self, steps, max_steps) -> list:
        """The stop hook `train(steps=..., max_steps=...)` runs with (none when both are None)."""
        if steps is None and max_steps is None:
            return []
        return [tf.compat.v1.train.StopAtStepHook(steps, max_steps)]

    def _convert_eval_steps_to_hooks(self, steps) -> list:
        """The hook that stops an evaluation after `steps` batches (none for None)."""
        if steps is None:
            return []
        if steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        return [engine_hooks.StopAfterStepsHook(steps)]

    def _assert_members_are_not_overridden(self, cls=None, obj=None) -> None:
        """2.15 refused subclasses that override its public methods; elastimator lets them (a no-op)."""
        del cls, obj

    def _maybe_warm_start(self, checkpoint_path) -> None:
        """Warm-starting happens inside the engine's session set-up; nothing to do at this point."""
        del checkpoint_path

    def _export_all_saved_models(self, export_dir_base: str, input_receiver_fn_map: Mapping[str, Callable],
                                 assets_extra=None, as_text: bool = False, checkpoint_path=None,
                                 strip_default_attrs: bool = True) -> bytes:
        """`experimental_export_all_saved_models`, with 2.15's private signature."""
        return exporting.export_all_saved_models(self, export_dir_base, input_receiver_fn_map, assets_extra,
                                                 as_text, checkpoint_path, strip_default_attrs=strip_default_attrs)

    def _is_default_call_model_fn(self) -> bool:
        """Whether `_call_model_fn` is this module's (not a subclass's override, nor patched on the class)."""
        return getattr(type(self)._call_model_fn, "elastimator_default", False)

