"""A tf.data source that pulls its elements from a Python generator, without `Dataset.from_generator`.

`tf.data.Dataset.from_generator` builds a `GeneratorDataset`, and TensorFlow
(2.21; 2.16 did not) constructs that kernel with `mallopt(M_MMAP_THRESHOLD,
128 KiB)`: a work-around for a Python 3.11 memory leak that fixes glibc's
threshold for the whole process. From then on every allocation over 128 KiB
(an embedding gradient, an optimizer temporary, a batch of text) is a fresh
`mmap` whose pages the kernel zeroes and faults in, on every step. On the
DeepFM benchmark model that doubled a training step (`bench/elastic_input.py`):
the input was not the cost, the allocator setting it left behind was.

`from_python` gives the same elements with ordinary dataset ops: each
iteration starts its own generator (as from_generator does), and a stateful
`numpy_function` pulls one element per call, in order. elastimator's own
Python-fed inputs use it; `warn_about_generator_datasets` tells a user whose
input_fn calls from_generator what it costs and what to use instead.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import os
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import tensorflow as tf

logger = logging.getLogger("elastimator")
_warned = False


def from_python(generator_fn: Callable[[], Iterable[Any]], output_signature: Any, name: str = "python_source"
                ) -> tf.data.Dataset:
    """The elements `generator_fn()` yields, each shaped like `output_signature` (a nest of tf.TensorSpec).

    Every iteration of the dataset calls `generator_fn()` anew. An exception the
    generator raises fails the iteration with that exception's message. The
    generator of an iteration stopped early is closed with the dataset (for an
    Estimator, with the graph of that train/evaluate/predict call).

    Example:
        >>> from_python(lambda: ((np.arange(3), b"x") for _ in range(2)),
        ...             (tf.TensorSpec([None], tf.int64), tf.TensorSpec([], tf.string)))
    """
    specs = tf.nest.flatten(output_signature)
    running: dict[int, Any] = {}
    keys = itertools.count()

    def start() -> np.int64:
        key = next(keys)  # atomic under the GIL, as the dict's assignment is
        running[key] = iter(generator_fn())
        return np.int64(key)

    def pull(key) -> list[np.ndarray]:
        key = int(key)
        generator = running[key]
        try:
            element = next(generator)
        except StopIteration:
            del running[key]
            return [_empty(spec) for spec in specs] + [np.bool_(True)]
        except BaseException:
            del running[key]
            raise
        return [_as_array(value, spec, name) for value, spec in
                zip(_flatten_like(output_signature, element, name), specs)] + [np.bool_(False)]

    def elements(key: tf.Tensor) -> tf.data.Dataset:
        def next_element(key):
            flat = tf.numpy_function(pull, [key], [s.dtype for s in specs] + [tf.bool], stateful=True,
                                     name=f"{name}_next")
            for tensor, spec in zip(flat, specs):
                tensor.set_shape(spec.shape)
            flat[-1].set_shape([])
            return tuple(flat)

        pulled = tf.data.Dataset.from_tensors(key).repeat().map(next_element)
        return pulled.take_while(lambda *flat: tf.logical_not(flat[-1])).map(
            lambda *flat: tf.nest.pack_sequence_as(output_signature, list(flat[:-1])))

    started = tf.data.Dataset.from_tensors(np.int64(0)).map(
        lambda _: tf.numpy_function(start, [], tf.int64, stateful=True, name=f"{name}_start"))
    return started.flat_map(elements)


def _flatten_like(signature: Any, element: Any, name: str) -> list:
    """The element's values in tf.nest.flatten(signature)'s order; a leaf may be any array-like (a list too)."""
    if isinstance(signature, tf.TensorSpec):
        return [element]
    if isinstance(signature, dict) and isinstance(element, dict) and set(signature) == set(element):
        return [v for key in sorted(signature) for v in _flatten_like(signature[key], element[key], name)]
    if isinstance(signature, (tuple, list)) and isinstance(element, (tuple, list)) and len(signature) == len(element):
        return [v for spec, value in zip(signature, element) for v in _flatten_like(spec, value, name)]
    raise TypeError(f"{name}: the generator yielded {type(element).__name__} {element!r:.200} where its signature "
                    f"has {signature}.")


def _as_array(value: Any, spec: tf.TensorSpec, name: str) -> np.ndarray:
    if spec.dtype == tf.string:
        array = np.asarray(value)
        if array.dtype.kind == "U":
            array = np.char.encode(array, "utf-8")
        if array.dtype.kind not in "SO":
            raise TypeError(f"{name}: expected text (bytes) for {spec}; got an array of {array.dtype}.")
    else:
        array = np.asarray(value, dtype=spec.dtype.as_numpy_dtype)
    if not spec.shape.is_compatible_with(array.shape):
        raise ValueError(f"{name}: expected a value of shape {spec.shape}; got one of shape {array.shape}.")
    return array


def _empty(spec: tf.TensorSpec) -> np.ndarray:
    """A placeholder element for the end of the generator (dropped before anyone sees it)."""
    shape = [0] if spec.shape.rank is None else [0 if d is None else d for d in spec.shape.as_list()]
    if spec.dtype == tf.string:
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, dtype=spec.dtype.as_numpy_dtype)


def warn_about_generator_datasets(graph: tf.Graph) -> None:
    """Warns, once per process, when `graph`'s input uses `tf.data.Dataset.from_generator` and this TensorFlow
    pins the mmap threshold for it (see the module doc)."""
    global _warned
    if _warned or not _pins_mmap_threshold():
        return
    if any(node.op == "GeneratorDataset" for node in _function_nodes(graph)):
        _warned = True
        logger.warning(
            "The input_fn uses tf.data.Dataset.from_generator. TensorFlow builds it with glibc's mmap threshold "
            "fixed at 128 KiB for this whole process, so every larger tensor is allocated afresh each step (a "
            "DeepFM step took 1.6x as long). elastimator.inputs.from_python(generator_fn, output_signature) "
            "yields the same elements without that.")


def _function_nodes(graph: tf.Graph) -> Iterator:
    """The nodes of `graph`'s functions (a dataset's map functions among them)."""
    # The graph's functions only: as_graph_def() would copy every constant (a dataset's arrays) on each call.
    definitions = [getattr(f, "definition", None) for f in getattr(graph, "_functions", {}).values()]
    return (node for d in definitions if d is not None for node in d.node_def)


@functools.cache
def _pins_mmap_threshold() -> bool:
    """Whether this TensorFlow's GeneratorDataset kernel carries the process-wide mallopt (2.21 does, 2.16 not)."""
    library = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2")
    try:
        return hasattr(ctypes.CDLL(library), _MEMORY_PATCH)
    except OSError:  # not Linux, or another layout: no glibc threshold to speak of
        return False


_MEMORY_PATCH = "_ZN10tensorflow4data25ApplyPython311MemoryPatchEv"
"""tensorflow::data::ApplyPython311MemoryPatch(), which GeneratorDatasetOp's constructor calls."""
