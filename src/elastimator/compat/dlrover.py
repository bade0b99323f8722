"""DLRover trainer import paths, served by elastimator when DLRover itself is not installed.

DLRover confs and their model code import the trainer's column and reader classes
and its logger:

    from dlrover.trainer.tensorflow.util.column_info import Column
    from dlrover.trainer.tensorflow.reader.file_reader import FileReader
    from dlrover.trainer.tensorflow.reader.base_reader import ElasticReader
    from dlrover.trainer.util.log_util import default_logger as logger

`modules()` builds those modules over elastimator's own classes, with DLRover's
constructor signatures (`FileReader(file_name, num_epochs, batch_size, ...)`,
`ElasticReader(path, num_epochs, batch_size, ...)`). Arguments that steer DLRover's
own sharding client (epochs, batch size, dynamic sharding) are accepted and not
used: the conf's `epoch` and `batch_size` keys decide, and elastimator's shard
service shards the data whenever a job runs under `elastimator launch`.
"""

from __future__ import annotations

import importlib.util
import logging
import types

from elastimator.data.column import NO_DEFAULT
from elastimator.data.column import Column as _Column
from elastimator.data.file_reader import FileReader as _FileReader
from elastimator.data.reader import ElasticReader as _ElasticReader

ROOT = "dlrover"
ENTRY_MODULES = ("dlrover.trainer.entry.local_entry", "dlrover.trainer")
"""The modules DLRover users run with `python -m`: `python -m elastimator.compat -m` runs elastimator's stand-in
for them, the module `elastimator.dlrover_entry`."""


class Column(_Column):
    """DLRover's `Column.create(name, dtype, is_sparse, is_label)`.

    DLRover's trainer read every field of a record as one value (`decode_csv`); `is_sparse` was a
    note on the column that nothing read. So here too each field is one value: a string column
    marked sparse is a string per example, as the conf's model code expects. (elastimator's own
    `Column(is_sparse=True)` is a `|`-separated list.)
    """

    @classmethod
    def create(cls, name: str, dtype, is_label: bool = False, is_sparse: bool = False,
               default=NO_DEFAULT) -> _Column:
        del is_sparse  # read as one value per field, as DLRover read it
        return _Column.create(name=name, dtype=dtype, is_label=is_label, default=default)


class FileReader(_FileReader):
    """DLRover's `FileReader(file_name, num_epochs=1, batch_size=64, enable_dynamic_sharding=True, skip_header=...)`.

    DLRover skipped the first line of every file unless told otherwise, and so
    dropped a record from files without a header. Here the default looks at
    the first line: it is skipped only when it does not parse as a record of
    the data set's columns. `skip_header=True` or `False` still forces either.
    """

    def __init__(self, file_name, num_epochs=1, batch_size=64, enable_dynamic_sharding=True,
                 skip_header: bool | None = None):
        del num_epochs, batch_size, enable_dynamic_sharding  # The conf's keys and the shard service decide.
        super().__init__(file_name, skip_header=skip_header)


class ElasticReader(_ElasticReader):
    """DLRover's `ElasticReader(path=None, num_epochs=1, batch_size=64, enable_dynamic_sharding=True)`."""

    def __init__(self, path=None, num_epochs=1, batch_size=64, enable_dynamic_sharding=True):
        del num_epochs, batch_size, enable_dynamic_sharding
        super().__init__(path=path)


def _module(name: str, package: bool = False, **attributes) -> types.ModuleType:
    module = types.ModuleType(name, f"{name}, served by elastimator.compat (DLRover is not installed).")
    module.__dict__.update(attributes)
    if package:
        module.__path__ = []
    return module


def real_dlrover_installed() -> bool:
    """True when a DLRover distribution is importable (then its own modules are used)."""
    return importlib.util.find_spec(ROOT) is not None


def modules() -> dict[str, types.ModuleType]:
    """The DLRover trainer modules confs import, keyed by their import path."""
    leaves = {
        "dlrover.trainer.tensorflow.util.column_info": {"Column": Column},
        "dlrover.trainer.tensorflow.reader.file_reader": {"FileReader": FileReader},
        "dlrover.trainer.tensorflow.reader.base_reader": {"ElasticReader": ElasticReader},
        "dlrover.trainer.util.log_util": {"default_logger": logging.getLogger("dlrover.trainer")},
    }
    served: dict[str, types.ModuleType] = {}
    for path, names in leaves.items():
        served[path] = _module(path, **names)
        parts = path.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            served.setdefault(parent, _module(parent, package=True))
    for path, module in served.items():  # Parents expose children as attributes, as real packages do.
        parent, _, child = path.rpartition(".")
        if parent:
            setattr(served[parent], child, module)
    return served
