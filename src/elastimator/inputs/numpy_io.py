"""`numpy_input_fn`: feed numpy arrays to an Estimator through tf.data."""

from __future__ import annotations

import logging
from typing import Callable, Mapping

import numpy as np
import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import InputFnError
from elastimator.inputs.batch_rows import batch_rows
from elastimator.inputs.python_source import from_python

logger = logging.getLogger("elastimator")


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
    if not lengths:
        raise InputFnError(f"{what} has no arrays; expected at least one.")
    if len(set(lengths.values())) != 1:
        raise InputFnError(f"All arrays must have the same length; got lengths {lengths}.")
    return next(iter(lengths.values()))


def _signature(arrays, batch: int | None):
    def spec(a: np.ndarray) -> tf.TensorSpec:
        dtype = tf.string if a.dtype.kind in "USO" else tf.as_dtype(a.dtype)
        return tf.TensorSpec((batch,) + a.shape[1:], dtype)

    return {k: spec(a) for k, a in arrays.items()} if isinstance(arrays, dict) else spec(arrays)


def _take(arrays, index):
    return {k: a[index] for k, a in arrays.items()} if isinstance(arrays, dict) else arrays[index]


def _sorted(arrays):
    """A dict's arrays in the order of their keys, as tf.estimator 2.15 gave numpy_input_fn's dicts to model_fn."""
    return {key: arrays[key] for key in sorted(arrays)} if isinstance(arrays, dict) else arrays


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
    Batches run on across epochs, as tf.estimator 2.15's queues made them
    (`batch_rows`): 800 rows for 2 epochs in batches of 64 are 25 steps.

    Args:
        x: A numpy array (passed to model_fn as one tensor) or a dict of arrays (passed in the order of its keys).
        y: Labels: an array, a dict of arrays, or None.
        batch_size: Examples per batch. With num_epochs set, the last batch of the last epoch may be smaller; with
            num_epochs=None every batch is full and has this static size.
        num_epochs: Passes over the data; None repeats forever.
        shuffle: Whether to shuffle each epoch. Must be given explicitly. The order follows the graph seed
            (RunConfig.tf_random_seed) when one is set, so seeded runs repeat exactly.
        queue_capacity: Examples buffered ahead of the model (prefetched, in batches).
        num_threads: Readers, each making num_epochs passes over the data, as tf.estimator 2.15's threads did:
            with num_epochs set, 2 make twice the batches. Their batches are taken in turn, in one thread.

    Raises:
        InputFnError: on mismatched lengths, no rows, a key in both x and y, shuffle not given, or a batch size,
            number of epochs or of threads that is not a positive int.
    """
    features = _as_arrays(x, "x")
    labels = None if y is None else _as_arrays(y, "y")
    if isinstance(features, dict) and isinstance(labels, dict):
        clash = sorted(set(features) & set(labels))
        if clash:
            raise InputFnError(f"numpy_input_fn: keys {clash} are in both x and y; rename one of them.")
    return arrays_input_fn(_sorted(features), None if labels is None else _sorted(labels), batch_size, num_epochs,
                           shuffle, queue_capacity, num_threads, name="numpy_input_fn")


def arrays_input_fn(features, labels, batch_size, num_epochs, shuffle, queue_capacity, num_threads, name: str
                    ) -> Callable[[], tf.data.Dataset]:
    """numpy_input_fn's and pandas_input_fn's input_fn over arrays (or dicts of them, in the order given)."""
    if not isinstance(shuffle, bool):
        raise InputFnError(f"{name}: shuffle must be True or False, set explicitly; got {shuffle!r}.")
    if not is_int(batch_size, minimum=1):
        raise InputFnError(f"{name}: batch_size must be a positive int; got {batch_size!r}.")
    if num_epochs is not None and not is_int(num_epochs, minimum=1):
        raise InputFnError(f"{name}: num_epochs must be a positive int or None; got {num_epochs!r}.")
    if not is_int(queue_capacity):
        raise InputFnError(f"{name}: queue_capacity must be an int; got {queue_capacity!r}.")
    if not is_int(num_threads, minimum=1):
        raise InputFnError(f"{name}: num_threads must be a positive int; got {num_threads!r}.")
    n = _length(features, "x")
    if labels is not None and _length(labels, "y") != n:
        raise InputFnError(f"{name}: x has {n} rows but y has {_length(labels, 'y')}.")
    if n == 0:
        raise InputFnError(f"{name}: x has no rows; pass at least one example.")
    if num_threads > 1 and num_epochs is not None:
        logger.warning("%s: num_threads=%d with num_epochs=%d reads the data %d times, as tf.estimator 2.15's "
                       "threads each read it num_epochs times; pass num_threads=1 to read it %d times.", name,
                       num_threads, num_epochs, num_threads * num_epochs, num_epochs)
    # Forever, every batch is full: its size is static, as 2.15's dequeue_many made it.
    batch = batch_size if num_epochs is None else None
    signature = _signature(features, batch) if labels is None else (
        _signature(features, batch), _signature(labels, batch))

    def input_fn() -> tf.data.Dataset:
        # RunConfig(tf_random_seed=...) seeds the graph; the shuffle order follows it, as tf.estimator's
        # seeded shuffle queues did, so a seeded run sees the same batches every time.
        seed = tf.compat.v1.get_default_graph().seed

        def batches():
            for index in batch_rows(n, batch_size, num_epochs, shuffle, readers=num_threads, seed=seed):
                batch_x = _take(features, index)
                yield batch_x if labels is None else (batch_x, _take(labels, index))

        dataset = from_python(batches, signature, name=name)
        return dataset.prefetch(max(1, queue_capacity // batch_size))

    return input_fn
