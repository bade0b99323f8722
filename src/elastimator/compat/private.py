"""Private helpers of tf.estimator 2.15 that frameworks import, each with 2.15's meaning (`migrate/surface.py`
says which module served each and who uses it).

* `util`: `parse_input_fn_result`, `parse_iterator_result`, `fn_args` (AdaNet, EasyRec);
* `estimator_export.estimator_export`: the decorator that named a symbol's public API path (EasyRec);
* `estimator._load_global_step_from_checkpoint_dir` (Mesh TensorFlow, GPT-Neo, the TPU models);
* `estimator.maybe_overwrite_model_dir_and_session_config`: the config an Estimator subclass runs with (TF Lattice);
* `tpu.tpu_estimator.BatchConfig` and `model_fn_inference_on_tpu` (AdaNet's TPU export path);
* TensorFlow's `distribute.estimator_training`, which left TensorFlow with tf.estimator (EasyRec).
"""

from __future__ import annotations

import collections
import logging
import os
import tempfile
from typing import Any, Callable

import tensorflow as tf
from tensorflow.python.util import function_utils

from elastimator.errors import ConfigError
from elastimator.estimator import EstimatorSpec, ModeKeys, RunConfig, call_model_fn, dataset_element, global_step_of
from elastimator.train_eval import train_and_evaluate as _train_and_evaluate

fn_args = function_utils.fn_args
"""The names of a function's positional parameters, through partials and bound methods (TensorFlow's own)."""


def parse_iterator_result(result) -> tuple[Any, Any]:
    """(features, labels) of what an input's iterator yields: a pair, or features alone (labels None).

    Raises:
        ValueError: for a list or tuple that is not a pair.
    """
    if isinstance(result, (list, tuple)):
        if len(result) != 2:
            raise ValueError(f"input_fn should return (features, labels) as a len 2 tuple; got {len(result)} "
                             "elements. Put extra tensors inside the features dict.")
        return result[0], result[1]
    return result, None


def parse_input_fn_result(result) -> tuple[Any, Any, list]:
    """(features, labels, input_hooks) of what an input_fn returned; a `tf.data.Dataset` is iterated in the
    current graph, with the hook that initializes its iterator."""
    element, hooks = dataset_element(result)
    return parse_iterator_result(element) + (list(hooks),)


def estimator_export(*api_names: str, **kwargs) -> Callable:
    """The decorator tf.estimator put on its public symbols; it names the symbol's API path and returns it
    unchanged (the name is kept as `_estimator_api_names`, where TensorFlow's API generator read it)."""
    del kwargs

    def record(symbol):
        try:
            symbol._estimator_api_names = api_names  # pylint: disable=protected-access
        except (AttributeError, TypeError):  # a builtin or a frozen object: nothing to record on
            pass
        return symbol

    return record


def _load_global_step_from_checkpoint_dir(checkpoint_dir: str) -> int:
    """The global step of the checkpoint `checkpoint_dir`'s state file names; 0 without one."""
    checkpoint = tf.train.latest_checkpoint(checkpoint_dir)
    return global_step_of(checkpoint) if checkpoint else 0


def maybe_overwrite_model_dir_and_session_config(config: RunConfig | None, model_dir) -> RunConfig:
    """The `RunConfig` an Estimator made with `config` and `model_dir` runs with: `config` (a default one for None)
    whose `model_dir` is `model_dir`, else config's own, else a new temporary directory.

    2.15 also filled in a missing `session_config` with its default; here it stays None, which the Estimator
    reads as its default session config for the task's role.

    Raises:
        ConfigError: (a ValueError, as 2.15 raised) `config` is not a RunConfig, or `model_dir` and
            `config.model_dir` differ.
    """
    if config is None:
        config = RunConfig()
    elif not isinstance(config, RunConfig):
        raise ConfigError(f"config must be an elastimator.RunConfig (tf.estimator.RunConfig); got "
                          f"{type(config).__name__}.")
    model_dir = os.fspath(model_dir) if model_dir is not None else None
    if model_dir and config.model_dir and model_dir != config.model_dir:
        raise ConfigError(f"model_dir={model_dir!r} differs from config.model_dir={config.model_dir!r}. Set it in "
                          "one place, or make them equal.")
    resolved = model_dir or config.model_dir
    if not resolved:
        resolved = tempfile.mkdtemp(prefix="elastimator-")
        logging.getLogger(__name__).warning("model_dir not set; using temporary directory %s.", resolved)
    return config if resolved == config.model_dir else config.replace(model_dir=resolved)


class BatchConfig(collections.namedtuple("BatchConfig", [
        "num_batch_threads", "max_batch_size", "batch_timeout_micros", "allowed_batch_sizes",
        "max_enqueued_batches"])):
    """How TPU inference batched requests (tf.estimator 2.15's fields; off a TPU nothing batches them)."""

    def __new__(cls, num_batch_threads, max_batch_size, batch_timeout_micros, allowed_batch_sizes,
                max_enqueued_batches=100):
        return super().__new__(cls, num_batch_threads, max_batch_size, batch_timeout_micros, allowed_batch_sizes,
                               max_enqueued_batches)


def model_fn_inference_on_tpu(model_fn: Callable, features, labels=None, config=None, params=None,
                              batch_config=None) -> EstimatorSpec:
    """The PREDICT `EstimatorSpec` of `model_fn` over `features`, for a serving export.

    2.15 compiled the model for a TPU and batched requests by `batch_config`; off a TPU the same model_fn is
    built on the host, unbatched (the export's signatures and outputs are those the TPU graph had).
    """
    del batch_config
    return call_model_fn(model_fn, features, labels, ModeKeys.PREDICT, params, config)


# --- tensorflow.python.distribute.estimator_training --------------------------------------------

def should_run_distribute_coordinator(config) -> bool:
    """Whether 2.15 would hand `train_and_evaluate` to TensorFlow's distribute coordinator: never here
    (elastimator runs every role itself, strategies included)."""
    del config
    return False


def train_and_evaluate(estimator, train_spec, eval_spec, executor_cls=None):
    """The distribute coordinator's `train_and_evaluate`: elastimator's, for this process's role."""
    del executor_cls
    return _train_and_evaluate.train_and_evaluate(estimator, train_spec, eval_spec)


def keras_lib_model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None, model_dir=None,
                                 config=None, checkpoint_format=None, use_v2_estimator=False, metric_names_map=None,
                                 export_outputs=None):
    """`keras_lib.model_to_estimator`, with 2.15's arguments: what tf-keras's own `tf_keras.estimator.
    model_to_estimator` calls (it imports keras_lib from tensorflow_estimator, and without it raised
    NotImplementedError). The estimator is elastimator's Keras estimator, as `tf.keras.estimator` gives.

    `checkpoint_format` ('saver' or 'checkpoint') chose how 2.15 saved the Keras weights it started from, and
    `use_v2_estimator` which Estimator class it made; elastimator starts from the model's weights either way.

    Raises:
        ValueError: a `checkpoint_format` 2.15 did not take either.
        NotImplementedError: for `export_outputs`, which elastimator's Keras estimator does not take: its export
            serves the model's outputs as one PredictOutput.
    """
    del use_v2_estimator
    if checkpoint_format not in (None, "saver", "checkpoint"):
        raise ValueError(f"model_to_estimator: checkpoint_format must be 'saver' or 'checkpoint'; got "
                         f"{checkpoint_format!r}.")
    if export_outputs is not None:
        raise NotImplementedError(
            "model_to_estimator(export_outputs=...) is not served: the estimator exports the Keras model's outputs "
            "as one PredictOutput (serving_default). Leave export_outputs out, or write a model_fn whose "
            "EstimatorSpec names its export_outputs.")
    from elastimator.keras import model_to_estimator  # pylint: disable=import-outside-toplevel

    return model_to_estimator(keras_model=keras_model, keras_model_path=keras_model_path,
                              custom_objects=custom_objects, model_dir=model_dir, config=config,
                              metric_names_map=metric_names_map)
