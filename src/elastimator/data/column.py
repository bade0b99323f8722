"""`Column`: one field of a record, its dtype, and whether it is the label."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import ConfError

_DTYPES = {
    "float32": tf.float32, "float": tf.float32,
    "float64": tf.float64, "double": tf.float64,
    "int32": tf.int32,
    "int64": tf.int64, "int": tf.int64, "long": tf.int64,
    "string": tf.string, "str": tf.string,
}
_CANONICAL = ("float32", "float64", "int32", "int64", "string")
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
"""Column names: what a feature key and a serving input name can both be."""


class _NoDefault:
    def __repr__(self) -> str:
        return "<required>"


NO_DEFAULT: Any = _NoDefault()


def _as_dtype(name: str, dtype) -> tf.DType:
    if isinstance(dtype, tf.DType) and dtype.name in _CANONICAL:
        return dtype
    if isinstance(dtype, type) and dtype in (str, bytes):
        return tf.string
    if isinstance(dtype, type) and dtype is int:
        return tf.int64
    if isinstance(dtype, type) and dtype is float:
        return tf.float32
    if isinstance(dtype, str) and dtype.lower() in _DTYPES:
        return _DTYPES[dtype.lower()]
    try:
        as_np = np.dtype(dtype)
    except TypeError:
        as_np = None
    if as_np is not None and as_np.name in _CANONICAL:
        return tf.as_dtype(as_np)
    raise ConfError(
        f"Column {name!r}: expected dtype one of {', '.join(_CANONICAL)} (or the aliases int, float, "
        f"double, long, str); got {dtype!r}."
    )


@dataclasses.dataclass(frozen=True)
class Column:
    """One field of every record.

    Attributes:
        name: Feature name (the key in the features dict).
        dtype: tf.float32, tf.float64, tf.int32, tf.int64 or tf.string.
        is_label: Whether this field is the label (it never reaches the serving signature).
        is_sparse: The field holds a list of values separated by `|`; it becomes a
            `tf.SparseTensor` of shape [batch, None].
        default: Value for an empty field; without one, an empty numeric field is a bad record.
    """

    name: str
    dtype: tf.DType
    is_label: bool = False
    is_sparse: bool = False
    default: Any = NO_DEFAULT

    @classmethod
    def create(cls, name: str, dtype, is_label: bool = False, is_sparse: bool = False,
               default: Any = NO_DEFAULT) -> "Column":
        """Makes a column; `dtype` may be a string such as "float32" or "int" (int64, never int8).

        Example:
            >>> Column.create(name="age", dtype="int")
            >>> Column.create(name="clicked", dtype="float32", is_label=True)
        """
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfError(f"Column name must be a non-empty string of letters, digits, '_', '-' or '.'; "
                            f"got {name!r}.")
        tf_dtype = _as_dtype(name, dtype)
        if default is not NO_DEFAULT:
            if is_sparse:
                raise ConfError(f"Column {name!r}: a sparse column has no default (an empty field is an empty list).")
            default = _check_default(name, tf_dtype, default)
        return cls(name=name, dtype=tf_dtype, is_label=bool(is_label), is_sparse=bool(is_sparse), default=default)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    @property
    def is_numeric(self) -> bool:
        return self.dtype != tf.string


def _check_default(name: str, dtype: tf.DType, default):
    if dtype == tf.string:
        if not isinstance(default, (str, bytes)):
            raise ConfError(f"Column {name!r}: default for a string column must be a str; got {default!r}.")
        return default if isinstance(default, str) else default.decode()
    if dtype.is_integer:
        if not is_int(default):
            raise ConfError(f"Column {name!r}: default for {dtype.name} must be an int; got {default!r}.")
        return int(default)
    if isinstance(default, bool) or not isinstance(default, (int, float, np.number)):
        raise ConfError(f"Column {name!r}: default for {dtype.name} must be a number; got {default!r}.")
    return float(default)


def check_columns(columns, where: str, need_label: bool) -> tuple[Column, ...]:
    """Validates a column list as a whole: types, unique names, exactly one label (when needed)."""
    if isinstance(columns, Column):
        columns = (columns,)
    if not isinstance(columns, (list, tuple)) or not columns:
        raise ConfError(f"{where}: 'columns' must be a non-empty list of Column; got {columns!r}.")
    for column in columns:
        if not isinstance(column, Column):
            raise ConfError(f"{where}: 'columns' must hold Column.create(...) objects; got {type(column).__name__}.")
    names = [c.name for c in columns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfError(f"{where}: column names must be unique; {twice} declared more than once.")
    labels = [c.name for c in columns if c.is_label]
    if len(labels) > 1:
        raise ConfError(f"{where}: exactly one column may have is_label=True; got {labels}.")
    if need_label and not labels:
        raise ConfError(
            f"{where}: no label column. Mark the target with Column.create(name=..., dtype=..., is_label=True)."
        )
    if len(labels) == len(columns):
        raise ConfError(f"{where}: the only column is the label; add feature columns.")
    return tuple(columns)
