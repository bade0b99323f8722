"""Which rows each batch of `numpy_input_fn` and `pandas_input_fn` holds: tf.estimator 2.15's batches, without
its queues.

tf.estimator 2.15 fed the rows into a queue and took batches out of it, so a batch
did not stop at the end of an epoch: 800 rows for 2 epochs in batches of 64 were
25 full batches, not 2 x (12 full + 1 of 32). Only the last batch of the last
epoch may be smaller; with `num_epochs=None` every batch is full. Each of
`num_threads` readers read the data `num_epochs` times in chunks of a batch,
and the queue interleaved their chunks, so two threads made twice the batches.

This module gives the same sequence of row numbers, batch by batch: one reader's
rows as one stream over its epochs (in order, or permuted anew each epoch),
readers' chunks taken in turn (one of the orders 2.15's threads could produce),
and that stream cut into batches. No TensorFlow, no I/O: the caller slices its
arrays with the numbers.

Example:
    >>> [b.tolist() for b in batch_rows(5, batch_size=2, num_epochs=2, shuffle=False)]
    [[0, 1], [2, 3], [4, 0], [1, 2], [3, 4]]
"""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator

import numpy as np


def batch_rows(rows: int, batch_size: int, num_epochs: int | None, shuffle: bool, readers: int = 1,
               seed: int | None = None) -> Iterator[np.ndarray]:
    """The row numbers (int64 arrays) of each batch, in order.

    Args:
        rows: How many rows the data has (> 0).
        batch_size: Rows per batch; only the last batch (when num_epochs is set) may hold fewer.
        num_epochs: Passes each reader makes over the rows; None: forever.
        shuffle: Each pass visits the rows in a fresh random order (else 0, 1, ..., rows - 1).
        readers: tf.estimator's num_threads: how many readers each make num_epochs passes.
        seed: Seeds the shuffled orders; None draws fresh ones.
    """
    if readers == 1:
        return _rebatch(_passes(rows, num_epochs, shuffle, np.random.default_rng(seed)), batch_size)
    generators = [np.random.default_rng(None if seed is None else [seed, reader]) for reader in range(readers)]
    chunks = [_rebatch(_passes(rows, num_epochs, shuffle, rng), batch_size) for rng in generators]
    return _rebatch(_in_turn(chunks), batch_size)


def _passes(rows: int, num_epochs: int | None, shuffle: bool, rng: np.random.Generator) -> Iterator[np.ndarray]:
    in_order = np.arange(rows, dtype=np.int64)
    for _ in itertools.count() if num_epochs is None else range(num_epochs):
        yield rng.permutation(rows).astype(np.int64, copy=False) if shuffle else in_order


def _rebatch(pieces: Iterable[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """`pieces` joined into one stream and cut every `size` rows; what is left at the end is the last batch."""
    pending: list[np.ndarray] = []
    count = 0
    for piece in pieces:
        pending.append(piece)
        count += len(piece)
        if count < size:
            continue
        joined = pending[0] if len(pending) == 1 else np.concatenate(pending)
        full = count - count % size
        for start in range(0, full, size):
            yield joined[start:start + size]
        rest = joined[full:]
        pending, count = ([rest], len(rest)) if len(rest) else ([], 0)
    if count:
        yield pending[0] if len(pending) == 1 else np.concatenate(pending)


def _in_turn(streams: list[Iterator[np.ndarray]]) -> Iterator[np.ndarray]:
    """One item from each stream in turn, dropping a stream when it ends."""
    live = list(streams)
    while live:
        for stream in list(live):
            item = next(stream, None)
            if item is None:
                live.remove(stream)
            else:
                yield item
