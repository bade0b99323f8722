"""Readers: where records come from.

* `ElasticReader` — a data set addressable by record index: `count_data()` and
  `read_data_by_index_range(start, end)`. A shard service (when there is one)
  hands out index ranges; without one the reader reads its whole range itself.
* Any object with an `iterator()` method yielding records is a (non-elastic)
  iterator reader.

A record is one delimited line, as a `str` or `bytes`.
"""

from __future__ import annotations

import abc
from typing import Iterator

from elastimator._validate import is_int
from elastimator.errors import ReaderError


class ElasticReader(abc.ABC):
    """A data set of `count_data()` records, read by index range.

    Subclasses implement `count_data` (return the count, or set `self._data_nums`
    as DLRover readers did) and `read_data_by_index_range`.

    Example:
        >>> class SquaresReader(ElasticReader):
        ...     def count_data(self):
        ...         return 1000
        ...     def read_data_by_index_range(self, start_index, end_index):
        ...         return [f"{i},{i * i}" for i in range(start_index, end_index)]
    """

    # Class-level defaults: a subclass may set `_data_nums` before calling `super().__init__()`, or never call it.
    path = None
    _data_nums: int | None = None

    def __init__(self, path: str | None = None):
        self.path = path

    @abc.abstractmethod
    def count_data(self):
        """Returns (or stores in `self._data_nums`) the number of records."""

    @abc.abstractmethod
    def read_data_by_index_range(self, start_index: int, end_index: int) -> list:
        """Returns the records with index in [start_index, end_index)."""

    @property
    def data_nums(self) -> int:
        """The number of records, from `count_data()` (computed once)."""
        if self._data_nums is None:
            counted = self.count_data()
            if counted is not None:
                self._data_nums = counted
        n = self._data_nums
        if not is_int(n, minimum=0):
            raise ReaderError(
                f"{type(self).__name__}.count_data() must return (or set self._data_nums to) a record count "
                f">= 0; got {n!r}."
            )
        return n

    def read_lines(self, start_index: int, end_index: int) -> list[bytes]:
        """Records [start_index, end_index) as bytes, each checked to be one delimited string.

        The form every pipeline consumes; a reader that can produce it without a
        round trip through `str` (FileReader) overrides this.
        """
        return [as_text(r, self.describe()) for r in records_in_range(self, start_index, end_index)]

    def describe(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


def is_iterator_reader(reader) -> bool:
    return callable(getattr(reader, "iterator", None))


def describe(reader) -> str:
    if isinstance(reader, ElasticReader):
        return reader.describe()
    path = getattr(reader, "path", None)
    return f"{type(reader).__name__}({path!r})" if path else type(reader).__name__


def check_reader(reader, where: str):
    """A conf's reader must be an ElasticReader or have iterator()."""
    if isinstance(reader, ElasticReader) or is_iterator_reader(reader):
        return reader
    raise ReaderError(
        f"{where}: 'reader' must be an ElasticReader (count_data, read_data_by_index_range), a FileReader, or "
        f"an object with an iterator() method; got {type(reader).__name__}."
    )


def as_text(record, source: str) -> bytes:
    """One record as bytes; anything but a delimited string is a clear error."""
    if isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode("utf-8")
    raise ReaderError(
        f"{source} produced a {type(record).__name__} record ({record!r:.80}); expected each record as one "
        "delimited string, e.g. '1.5,3,label'."
    )


def records_in_range(reader: ElasticReader, start: int, end: int) -> Iterator:
    """Calls the reader, turning its failures into ReaderErrors that name it."""
    try:
        records = reader.read_data_by_index_range(start, end)
    except ReaderError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of user code is reported with its context
        raise ReaderError(f"{reader.describe()}.read_data_by_index_range({start}, {end}) raised {e!r}.") from e
    if records is None or len(records) != end - start:
        got = "None" if records is None else f"{len(records)} records"
        raise ReaderError(
            f"{reader.describe()}.read_data_by_index_range({start}, {end}) returned {got}; expected {end - start}."
        )
    return iter(records)
