"""Logit functions: the part of a canned model between features and logits, for model_fns that compose their own
(`tf.estimator.experimental.call_logit_fn` and `tf.compat.v1.estimator.experimental.*_logit_fn_builder`).

A logit_fn takes `features` and, where it names them, `mode`, `params` and `config`, and returns a logits
tensor (or a dict of them); the builders make the DNN's and the linear model's, with the canned estimators'
layers and variable names.
"""

from __future__ import annotations

from typing import Callable, Mapping

import tensorflow as tf

from elastimator.errors import ConfigError, ModelFnError
from elastimator.estimator import ModeKeys, fn_args
from elastimator.premade.dnn import activation_of, check_dropout, check_hidden_units, dnn_logits
from elastimator.premade.features import check_columns, dense_input, linear_logits


def call_logit_fn(logit_fn: Callable, features, mode, params, config):
    """Calls `logit_fn` with `features` and whichever of `mode`, `params` and `config` it takes.

    Returns:
        Its logits: a tensor, or a dict of str -> tensor.

    Raises:
        ModelFnError (a ValueError): when it returns anything else.
    """
    accepted = fn_args(logit_fn)
    offered = {"mode": mode, "params": params, "config": config}
    logits = logit_fn(features=features, **{name: value for name, value in offered.items() if name in accepted})
    if isinstance(logits, Mapping):
        if not all(isinstance(k, str) and isinstance(v, tf.Tensor) for k, v in logits.items()):
            raise ModelFnError(f"logit_fn returned a dict; expected str keys and tensor values, got {logits!r}.")
    elif not isinstance(logits, tf.Tensor):
        raise ModelFnError(f"logit_fn must return a tensor or a dict of tensors; got {type(logits).__name__}.")
    return logits


def dnn_logit_fn_builder(units, hidden_units, feature_columns, activation_fn, dropout, input_layer_partitioner,
                         batch_norm) -> Callable:
    """A logit_fn(features, mode) of `DNNClassifier`'s network: the input layer (split by
    `input_layer_partitioner`) under `input_from_feature_columns`, the hidden layers, a `units`-wide logits layer.

    Raises:
        ConfigError (a ValueError): if `units` is not an int.
    """
    if isinstance(units, bool) or not isinstance(units, int):
        raise ConfigError(f"dnn_logit_fn_builder: units must be an int; got {units!r}.")
    columns = check_columns(feature_columns, "feature_columns")
    hidden, activation, rate = check_hidden_units(hidden_units), activation_of(activation_fn), check_dropout(dropout)

    def dnn_logit_fn(features, mode):
        with tf.compat.v1.variable_scope("input_from_feature_columns", partitioner=input_layer_partitioner):
            net = dense_input(features, columns)
        return dnn_logits(net, hidden_units=hidden, units=units, activation=activation, dropout=rate,
                          batch_norm=bool(batch_norm), training=mode == ModeKeys.TRAIN)

    return dnn_logit_fn


def linear_logit_fn_builder(units, feature_columns, sparse_combiner="sum") -> Callable:
    """A logit_fn(features) of `LinearClassifier`'s model: `units` logits, with a bias, over `feature_columns`."""
    if isinstance(units, bool) or not isinstance(units, int):
        raise ConfigError(f"linear_logit_fn_builder: units must be an int; got {units!r}.")
    columns = check_columns(feature_columns, "feature_columns")

    def linear_logit_fn(features):
        return linear_logits(features, columns, units, sparse_combiner)

    return linear_logit_fn
