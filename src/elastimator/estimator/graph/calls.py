"""Calling users' `input_fn` and `model_fn` with the arguments they accept."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
from typing import Any, Callable

import tensorflow as tf

from elastimator.errors import InputFnError, ModelFnError
from elastimator.estimator import log_lines, tf_internals
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.spec import EstimatorSpec
from elastimator.estimator.step.training_step import StepInput
from elastimator.inputs import python_source

_MODEL_FN_ARGS = ("features", "labels", "mode", "params", "config")
_INPUT_FN_ARGS = ("mode", "params", "config", "input_context")


def fn_args(fn: Callable) -> tuple[str, ...]:
    """Names of the parameters `fn` takes, seeing through partials and bound methods."""
    bound: set[str] = set()
    while isinstance(fn, functools.partial):
        bound.update(fn.keywords or {})
        fn = fn.func
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return ()
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return tuple(n for n in _MODEL_FN_ARGS + _INPUT_FN_ARGS if n not in bound)
    return tuple(
        name for name, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and name not in bound
    )


def _describe(fn: Callable, kind: str) -> str:
    """How a message names a user's function: `kind` ("model_fn") before its name, unless the name says it."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return name if name.endswith(kind) else f"{kind} {name}"


def check_model_fn(model_fn: Callable, params: dict | None) -> tuple[str, ...]:
    """Validates a model_fn's signature once, when the Estimator is built."""
    if not callable(model_fn):
        raise ModelFnError(f"model_fn must be callable; got {type(model_fn).__name__}.")
    args = fn_args(model_fn)
    if "features" not in args:
        raise ModelFnError(
            f"{_describe(model_fn, 'model_fn')} must take a `features` argument; it takes {list(args)}. "
            "Expected model_fn(features, labels, mode, params, config), any subset with features."
        )
    if params and "params" not in args:
        raise ModelFnError(
            f"Estimator was given params={params!r} but {_describe(model_fn, 'model_fn')} takes no `params` "
            "argument. Add `params` to model_fn or stop passing params."
        )
    return args


@dataclasses.dataclass(frozen=True)
class InputResult:
    """What an input_fn produced, as tensors, plus what must run to start it."""

    features: Any
    labels: Any
    hooks: tuple = ()
    step_outputs: dict = dataclasses.field(default_factory=dict)
    """What the input declared for hooks next to its features (see `training_step.StepInput`)."""


class DatasetInitializerHook(tf.compat.v1.train.SessionRunHook):
    """Starts a dataset iterator (a strategy's distributed one too) when the session is created."""

    def __init__(self, iterator, dataset: tf.data.Dataset | None = None, initializer: tf.Operation | None = None):
        self.iterator = iterator
        self.dataset = dataset
        """The dataset the iterator runs over (when a plain input_fn's)."""
        self.initializer = initializer
        """What starts the iterator, where it was made for another dataset first (a kept graph's); None: its own."""

    def begin(self):
        self._initializer = self.initializer if self.initializer is not None else self.iterator.initializer

    def after_create_session(self, session, coord):
        del coord
        session.run(self._initializer)


def plain_dataset(hooks) -> bool:
    """Whether an input's `hooks` are one dataset's iterator, started by its hook alone (a kept graph starts it on
    each call's dataset)."""
    return len(hooks) == 1 and isinstance(hooks[0], DatasetInitializerHook) and hooks[0].dataset is not None


def start_on(iterator, dataset: tf.data.Dataset) -> tf.Operation:
    """What starts `iterator` on `dataset` (of the same element spec): `make_initializer`, without the deprecation
    warnings TensorFlow's own use of the iterator's old properties logs."""
    with tf_internals.deprecation.silence():  # make_initializer reads the iterator's deprecated properties
        return iterator.make_initializer(dataset)


def input_fn_result(input_fn: Callable, mode: str, params: dict, config,
                    input_context: tf.distribute.InputContext | None = None):
    """Calls `input_fn` on the CPU with the arguments it takes (`input_context` only where one is given: a
    strategy's input pipeline) and returns what it returned."""
    if not callable(input_fn):
        raise InputFnError(f"input_fn must be callable; got {type(input_fn).__name__}.")
    args = fn_args(input_fn)
    kwargs: dict[str, Any] = {}
    if "mode" in args:
        kwargs["mode"] = mode
    if "params" in args:
        kwargs["params"] = params
    if "config" in args:
        kwargs["config"] = config
    if "input_context" in args and input_context is not None:
        kwargs["input_context"] = input_context
    with tf.compat.v1.device("/cpu:0"):
        result = input_fn(**kwargs)
    python_source.warn_about_generator_datasets(tf.compat.v1.get_default_graph())
    return result


def dataset_element(result) -> tuple[Any, tuple]:
    """(what an input_fn's result yields, the hooks that start it): a `tf.data.Dataset` becomes its next element
    in the current graph, with the hook that initializes its iterator; anything else is returned as it is."""
    if not isinstance(result, tf.data.Dataset):
        return result, ()
    iterator = tf.compat.v1.data.make_initializable_iterator(result)
    return iterator.get_next(), (DatasetInitializerHook(iterator, result),)


def call_input_fn(input_fn: Callable, mode: str, params: dict, config) -> InputResult:
    """Calls `input_fn` in the current graph and turns its result into tensors.

    Accepts a `tf.data.Dataset` of `(features, labels)` or of features, or a
    `(features, labels)` tuple, or features alone.
    """
    result, hooks = dataset_element(input_fn_result(input_fn, mode, params, config))
    if isinstance(result, StepInput):
        return InputResult(features=result.features, labels=result.labels, hooks=hooks,
                           step_outputs=dict(result.step_outputs))
    features, labels = split(result, input_fn)
    return InputResult(features=features, labels=labels, hooks=hooks)


def split(result, input_fn) -> tuple[Any, Any]:
    """(features, labels) of what an input_fn's dataset yields or it returned: a pair, or features alone."""
    if isinstance(result, (tuple, list)):
        if len(result) != 2:
            raise InputFnError(
                f"{_describe(input_fn, 'input_fn')} returned a {len(result)}-tuple; expected (features, labels), "
                "features alone, or a tf.data.Dataset of either. Put extra tensors inside the features dict."
            )
        return result[0], result[1]
    if result is None:
        raise InputFnError(
            f"{_describe(input_fn, 'input_fn')} returned None; expected a tf.data.Dataset, "
            "(features, labels), or features."
        )
    return result, None


def call_model_fn(
    model_fn: Callable,
    features: Any,
    labels: Any,
    mode: str,
    params: dict | None,
    config,
) -> EstimatorSpec:
    """Calls `model_fn` with the arguments it takes and checks it returned an EstimatorSpec."""
    args = fn_args(model_fn)
    kwargs: dict[str, Any] = {"features": features}
    if "labels" in args:
        kwargs["labels"] = labels
    elif labels is not None and mode != ModeKeys.PREDICT:
        raise ModelFnError(
            f"{_describe(model_fn, 'model_fn')} takes no `labels` argument, but input_fn returned labels. "
            "Add `labels` to model_fn, or return features only from input_fn."
        )
    if "mode" in args:
        kwargs["mode"] = mode
    if "params" in args:
        kwargs["params"] = copy.deepcopy(params) if params is not None else {}
    if "config" in args:
        kwargs["config"] = config
    from elastimator.estimator.graph import keras_traps  # imported here: it imports Keras only when needed

    with log_lines.calling_model_fn(), keras_traps.explain_model_fn_errors(model_fn), keras_traps.fresh_keras_names():
        spec = model_fn(**kwargs)
    if not isinstance(spec, EstimatorSpec):
        raise ModelFnError(
            f"{_describe(model_fn, 'model_fn')} must return an EstimatorSpec; got {type(spec).__name__}: "
            f"{spec!r:.200}. Return elastimator.EstimatorSpec(mode=mode, ...)."
        )
    if spec.mode != mode:
        raise ModelFnError(
            f"{_describe(model_fn, 'model_fn')} was called with mode={mode!r} but returned an EstimatorSpec "
            f"with mode={spec.mode!r}. Pass the `mode` argument through to EstimatorSpec."
        )
    return spec
