"""`numpy_input_fn`: feed numpy arrays to an Estimator through tf.data."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import InputFnError
from elastimator.inputs.python_source import from_python


def _as_arrays(value, what: str) -> dict[str, np.ndarray] | np.ndarray:
    if isinstance(value, Mapping):
        if not value:
            raise InputFnError(f"{what} must not be an empty dict.")
        return {str(k): np.asarray(v) for k, v in value.items()}
    return np.asarray(value)


def _length(arrays, what: str) -> int:
    items = arrays.items() if isinstance(arrays, dict) else [(what, arrays)]
    lengths = {}
    for key, array in items:
        if array.ndim == 0:
            raise InputFnError(f"{what} {key!r} is a scalar; expected an array with one row per example.")
        lengths[key] = len(array)
    if len(set(lengths.values())) != 1:
        raise InputFnError(f"All arrays must have the same length; got lengths {lengths}.")
    return next(iter(lengths.values()))


def _signature(arrays):
    def spec(a: np.ndarray) -> tf.TensorSpec:
        dtype = tf.string if a.dtype.kind in "USO" else tf.as_dtype(a.dtype)
        return tf.TensorSpec((None,) + a.shape[1:], dtype)

    return {k: spec(a) for k, a in arrays.items()} if isinstance(arrays, dict) else spec(arrays)


def _take(arrays, index):
    return {k: a[index] for k, a in arrays.items()} if isinstance(arrays, dict) else arrays[index]


def numpy_input_fn(
    x,
    y=None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int = 1000,
    num_threads: int = 1,
) -> Callable[[], tf.data.Dataset]:
    """Returns an input_fn that feeds dicts of numpy arrays (x) and labels (y) in batches.

    Arrays are sliced in Python per batch and streamed into tf.data, so they
    never become constants in the graph (large data stays out of graph.pbtxt).

    Args:
        x: A numpy array (passed to model_fn as one tensor) or a dict of arrays.
        y: Labels: an array, a dict of arrays, or None.
        batch_size: Examples per batch; the last batch may be smaller.
        num_epochs: Passes over the data; None repeats forever.
        shuffle: Whether to shuffle each epoch. Must be given explicitly. The order follows the graph seed
            (RunConfig.tf_random_seed) when one is set, so seeded runs repeat exactly.
        queue_capacity: Batches buffered ahead of the model (prefetch).
        num_threads: Accepted for compatibility; batches are produced in order by one thread.

    Raises:
        InputFnError: on mismatched lengths, a key in both x and y, or shuffle not given.
    """
    del num_threads
    if not isinstance(shuffle, bool):
        raise InputFnError(f"numpy_input_fn: shuffle must be True or False, set explicitly; got {shuffle!r}.")
    if not is_int(batch_size, minimum=1):
        raise InputFnError(f"numpy_input_fn: batch_size must be a positive int; got {batch_size!r}.")
    if num_epochs is not None and (not isinstance(num_epochs, int) or num_epochs <= 0):
        raise InputFnError(f"numpy_input_fn: num_epochs must be a positive int or None; got {num_epochs!r}.")
    features = _as_arrays(x, "x")
    labels = None if y is None else _as_arrays(y, "y")
    if isinstance(features, dict) and isinstance(labels, dict):
        clash = sorted(set(features) & set(labels))
        if clash:
            raise InputFnError(f"numpy_input_fn: keys {clash} are in both x and y; rename one of them.")
    n = _length(features, "x")
    if labels is not None and _length(labels, "y") != n:
        raise InputFnError(f"numpy_input_fn: x has {n} rows but y has {_length(labels, 'y')}.")
    signature = _signature(features) if labels is None else (_signature(features), _signature(labels))

    def input_fn() -> tf.data.Dataset:
        # RunConfig(tf_random_seed=...) seeds the graph; the shuffle order follows it, as tf.estimator's
        # seeded shuffle queues did, so a seeded run sees the same batches every time.
        seed = tf.compat.v1.get_default_graph().seed

        def batches():
            rng = np.random.default_rng(seed)
            epoch = 0
            while num_epochs is None or epoch < num_epochs:
                order = rng.permutation(n) if shuffle else np.arange(n)
                for start in range(0, n, batch_size):
                    index = order[start:start + batch_size]
                    batch_x = _take(features, index)
                    yield batch_x if labels is None else (batch_x, _take(labels, index))
                epoch += 1

        dataset = from_python(batches, signature, name="numpy_input_fn")
        return dataset.prefetch(max(1, queue_capacity // batch_size))

    return input_fn
