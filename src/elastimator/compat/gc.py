"""`tensorflow_estimator.python.estimator.gc`: choosing which timestamped exports to keep, as tf.estimator 2.15's
exporters did it and EasyRec's exporters still do.

A `Path` is an export directory and its version (its timestamp); a filter takes a list of Paths and returns
those it keeps. `_get_paths(base_dir, parser)` lists the exports under `base_dir`, each given its version by
`parser` (which returns None for an entry that is no export).
"""

from __future__ import annotations

import collections
import heapq
import os
from typing import Callable, Iterable

import tensorflow as tf

Path = collections.namedtuple("Path", "path export_version")

Filter = Callable[[Iterable[Path]], list]


def _largest_export_versions(n: int) -> Filter:
    """Keeps the `n` exports with the largest versions."""
    def keep(paths):
        largest = set(heapq.nlargest(n, (p.export_version for p in paths)))
        return sorted(p for p in paths if p.export_version in largest)
    return keep


def _one_of_every_n_export_versions(n: int) -> Filter:
    """Keeps, of each run of `n` consecutive versions (0..n-1, n..2n-1, ...), the largest one present."""
    def keep(paths):
        newest: dict[int, Path] = {}
        for p in paths:
            bucket = p.export_version // n
            if bucket not in newest or p.export_version > newest[bucket].export_version:
                newest[bucket] = p
        return sorted(newest.values())
    return keep


def _mod_export_version(n: int) -> Filter:
    """Keeps the exports whose version is a multiple of `n`."""
    def keep(paths):
        return sorted(p for p in paths if p.export_version % n == 0)
    return keep


def _union(first: Filter, second: Filter) -> Filter:
    """Keeps what either filter keeps."""
    def keep(paths):
        paths = list(paths)
        return sorted(set(first(paths)) | set(second(paths)))
    return keep


def _negation(kept: Filter) -> Filter:
    """Keeps what `kept` drops (the exports to delete)."""
    def keep(paths):
        paths = list(paths)
        return sorted(set(paths) - set(kept(paths)))
    return keep


def _get_paths(base_dir: str, parser: Callable[[Path], Path | None]) -> list:
    """The exports under `base_dir`, as `parser` versions them (entries it returns None for are left out)."""
    found = []
    for name in tf.io.gfile.listdir(base_dir):
        parsed = parser(Path(os.path.join(tf.compat.as_str_any(base_dir), tf.compat.as_str_any(name)), None))
        if parsed is not None:
            found.append(parsed)
    return sorted(found)
