"""Feature columns into tensors for the canned estimators, with errors that name what is missing."""

from __future__ import annotations

from typing import Iterable, Mapping

import tensorflow as tf

from elastimator.errors import ConfigError, InputFnError

_fc = tf.compat.v1.feature_column


def check_columns(columns, argument: str, *, allow_empty: bool = False) -> tuple:
    """`columns` as a tuple of feature columns (from tf.feature_column or tf.compat.v1.feature_column)."""
    if columns is None:
        columns = ()
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Iterable):
        raise ConfigError(f"{argument}: expected a list of feature columns; got {columns!r}.")
    columns = tuple(columns)
    for column in columns:
        if _required_keys(column) is None:
            raise ConfigError(f"{argument}: expected feature columns (tf.feature_column.*); got {column!r}.")
    if not columns and not allow_empty:
        raise ConfigError(f"{argument}: needs at least one feature column.")
    return columns


def _required_keys(column) -> set[str] | None:
    spec = getattr(column, "parse_example_spec", None)
    if spec is None:
        spec = getattr(column, "_parse_example_spec", None)
    return set(spec) if isinstance(spec, Mapping) else None


def check_features(features, columns: Iterable, estimator: str) -> dict:
    """The features as a dict, after checking every column's raw feature is in it."""
    if isinstance(features, tf.Tensor):
        raise InputFnError(f"{estimator}: features must be a dict keyed by feature name (the columns read "
                           "features by key); input_fn returned a single tensor.")
    if not isinstance(features, Mapping):
        raise InputFnError(f"{estimator}: features must be a dict; got {type(features).__name__}.")
    needed = set().union(*(_required_keys(c) or set() for c in columns)) if columns else set()
    missing = sorted(needed - set(features))
    if missing:
        raise InputFnError(
            f"{estimator}: the feature columns read feature(s) {missing}, which input_fn did not return; it "
            f"returned {sorted(features)}. Add them to input_fn's features or drop their columns."
        )
    return dict(features)


def dense_input(features: Mapping, columns: tuple) -> tf.Tensor:
    """[batch, sum of column widths] from dense / indicator / embedding columns."""
    return _fc.input_layer(features, list(columns))


def linear_logits(features: Mapping, columns: tuple, units: int, sparse_combiner: str) -> tf.Tensor:
    """A linear model over `columns`: [batch, units], with a bias."""
    if sparse_combiner not in ("sum", "mean", "sqrtn"):
        raise ConfigError(f"sparse_combiner: expected 'sum', 'mean' or 'sqrtn'; got {sparse_combiner!r}.")
    return _fc.linear_model(features, list(columns), units=units, sparse_combiner=sparse_combiner)


def is_embedding(column) -> bool:
    """True for embedding columns (dense vectors looked up from a categorical column)."""
    return type(column).__name__ in ("EmbeddingColumn", "_EmbeddingColumn", "SharedEmbeddingColumn",
                                     "_SharedEmbeddingColumn")


def embedding_dimension(column) -> int:
    return int(getattr(column, "dimension"))


def _parse_spec(feature_columns, label_key: str, label: tf.io.FixedLenFeature, weight_column) -> dict:
    if not isinstance(label_key, str) or not label_key:
        raise ConfigError(f"label_key: expected a non-empty feature name; got {label_key!r}.")
    spec = _fc.make_parse_example_spec(list(check_columns(feature_columns, "feature_columns")))
    if label_key in spec:
        raise ConfigError(f"label_key {label_key!r} is also a feature column's key; labels must be a separate key.")
    spec[label_key] = label
    if weight_column is not None:
        key = weight_column if isinstance(weight_column, str) else weight_column.key
        spec.setdefault(key, tf.io.FixedLenFeature([1], tf.float32))
    return spec


def classifier_parse_example_spec(feature_columns, label_key: str, label_dtype=tf.int64, label_default=None,
                                  weight_column=None) -> dict:
    """The `tf.io.parse_example` spec for the columns plus an int (or string) class label [1]."""
    return _parse_spec(feature_columns, label_key, tf.io.FixedLenFeature([1], label_dtype, label_default),
                       weight_column)


def regressor_parse_example_spec(feature_columns, label_key: str, label_dtype=tf.float32, label_default=None,
                                 label_dimension: int = 1, weight_column=None) -> dict:
    """The `tf.io.parse_example` spec for the columns plus a float label [label_dimension]."""
    return _parse_spec(feature_columns, label_key,
                       tf.io.FixedLenFeature([label_dimension], label_dtype, label_default), weight_column)
