"""`FileReader`: delimited text files (CSV, TSV; plain or gzip), streamed."""

from __future__ import annotations

import bisect
import gzip
import itertools
import logging
import os
import re
from typing import Callable

import tensorflow as tf

from elastimator.data.parsing import _FLOAT
from elastimator.data.reader import ElasticReader
from elastimator.errors import MissingPathError, ReaderError

logger = logging.getLogger("elastimator")
_CHUNK = 1 << 20
_NUMBER = re.compile(_FLOAT)
_HEADERS_LOGGED = 3

HeaderRule = Callable[[bytes, str], "str | None"]
"""(first line, field delimiter) -> why the line is a header, or None when it is a record."""


def looks_like_header(first: bytes, second: bytes | None, delim: str) -> str | None:
    """The rule without columns: a field that is not a number above one that is marks a header."""
    if second is None:
        return None
    above = first.decode("utf-8", "replace").split(delim)
    below = second.decode("utf-8", "replace").split(delim)
    for name, value in zip(above, below):
        if value.strip() and _NUMBER.fullmatch(value.strip()) and not _NUMBER.fullmatch(name.strip()):
            return f"{name.strip()!r} is not a number where the next line has {value.strip()!r}"
    return None


def _expand(path) -> list[str]:
    patterns = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    files: list[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if tf.io.gfile.isdir(pattern):
            found = sorted(os.path.join(pattern, f) for f in tf.io.gfile.listdir(pattern)
                           if not f.startswith(".") and not tf.io.gfile.isdir(os.path.join(pattern, f)))
        else:
            found = sorted(tf.io.gfile.glob(pattern))
        if not found:
            raise MissingPathError(
                f"FileReader: no file matches {pattern!r} (current directory: {os.getcwd()}). Check the path, "
                "or give a directory, a glob such as 'data/part-*.csv', or a list of files."
            )
        files.extend(found)
    return files


def _is_gzip(path: str) -> bool:
    return path.endswith(".gz")


def _open(path: str):
    return gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")


def _count_lines(path: str) -> int:
    """Counts lines by scanning raw bytes in 1 MiB chunks (no decoding, no splitting)."""
    lines, last = 0, b"\n"
    with _open(path) as f:
        while chunk := f.read(_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


class FileReader(ElasticReader):
    """Reads delimited text files: one file, a glob, a directory, or a list of those.

    Files are streamed (never loaded whole) and parsed inside the tf.data graph.
    Files ending in `.gz` are read as gzip.

    Args:
        path: A file, glob, directory, or list of them.
        skip_header: True: every file starts with a header line to skip. False:
            every line is a record. None (the default): each file's first line is
            looked at and skipped only if it is not a record — in a data set, when
            a numeric column's field is not a number (or the line names the
            columns); alone, when a field is not a number above one that is. Each
            skipped header is logged. No record is dropped and no header fails the job.
        field_delim: Field separator; by default tab for .tsv files, else comma.

    Example:
        >>> FileReader("data/train-*.csv")                    # headers found and skipped
        >>> FileReader("data/part-*.csv", skip_header=False)  # every line is a record
    """

    def __init__(self, path, skip_header: bool | None = None, field_delim: str | None = None):
        super().__init__(path=path)
        if skip_header is not None and not isinstance(skip_header, bool):
            raise ReaderError(f"FileReader: skip_header must be True, False or None (look at each file's first "
                              f"line); got {skip_header!r}.")
        self.skip_header = skip_header
        self._field_delim = field_delim
        self._files: list[str] | None = None
        self._headers: list[int] | None = None
        self._header_rule: HeaderRule | None = None
        self._offsets: list[int] | None = None
        self._line_starts: dict[int, list[int]] = {}

    def use_header_rule(self, rule: HeaderRule) -> None:
        """Decide whether first lines are headers with `rule` (a data set's columns) instead of by shape alone."""
        if rule is not self._header_rule:
            self._header_rule = rule
            self._headers = self._offsets = None
            self._line_starts = {}

    @property
    def headers(self) -> list[int]:
        """Header lines (0 or 1) at the start of each file, decided once."""
        if self._headers is None:
            if self.skip_header is not None:
                self._headers = [int(self.skip_header)] * len(self.files)
            else:
                self._headers = self._find_headers()
        return self._headers

    def _find_headers(self) -> list[int]:
        headers, logged = [], 0
        for path in self.files:
            with _open(path) as f:
                lines = [line.rstrip(b"\r\n") for line in itertools.islice(f, 2)]
            if not lines:
                headers.append(0)
                continue
            if self._header_rule is not None:
                why = self._header_rule(lines[0], self.field_delim)
            else:
                why = looks_like_header(lines[0], lines[1] if len(lines) > 1 else None, self.field_delim)
            headers.append(int(why is not None))
            if why is not None and logged < _HEADERS_LOGGED:
                logger.info("%s: the first line of %s is a header (%s), not a record; skipped: %r", self.describe(),
                            path, why, lines[0][:120].decode("utf-8", "replace"))
                logged += 1
        if sum(headers) > logged:
            logger.info("%s: %d more file(s) start with a header line; skipped.", self.describe(),
                        sum(headers) - logged)
        return headers

    def describe(self) -> str:
        return f"FileReader({self.path!r})"

    @property
    def files(self) -> list[str]:
        """The files to read, resolved (and checked) on first use."""
        if self._files is None:
            self._files = _expand(self.path)
        return self._files

    @property
    def configured_field_delim(self) -> str | None:
        """The delimiter given to the constructor, if any."""
        return self._field_delim

    @property
    def field_delim(self) -> str:
        if self._field_delim is not None:
            return self._field_delim
        first = self.files[0].removesuffix(".gz")
        return "\t" if first.endswith(".tsv") else ","

    @property
    def compressed(self) -> bool:
        gz = {_is_gzip(f) for f in self.files}
        if len(gz) > 1:
            raise ReaderError(f"FileReader({self.path!r}): mixes gzip and plain files; use one kind per reader.")
        return gz.pop()

    def record_counts(self) -> list[int]:
        """Records per file (header lines excluded)."""
        return [max(0, _count_lines(f) - header) for f, header in zip(self.files, self.headers)]

    def count_data(self) -> int:
        counts = self.record_counts()
        self._offsets = list(itertools.accumulate(counts, initial=0))
        return self._offsets[-1]

    def mean_record_bytes(self) -> float:
        """Bytes on disk per record, headers included (compressed bytes for gzip files); 0 with no records."""
        records = self.data_nums
        return sum(os.path.getsize(f) for f in self.files) / records if records else 0.0

    @tf.autograph.experimental.do_not_convert  # plain Python where the pipeline's functions are traced
    def locate(self, records) -> tuple[tf.Tensor, tf.Tensor]:
        """(file index, 1-based line number) of each 0-based record index across the files, headers counted, as
        TensorFlow ops (an input pipeline runs them in C++, not in Python)."""
        if self._offsets is None:
            self.count_data()
        records = tf.cast(records, tf.int64)
        offsets = tf.constant(self._offsets, tf.int64)
        files = tf.searchsorted(offsets[1:], records, side="right", out_type=tf.int32)
        lines = records - tf.gather(offsets, files) + tf.gather(tf.constant(self.headers, tf.int64), files) + 1
        return files, lines

    def _starts(self, file_no: int) -> list[int] | None:
        """Byte offset of every record of a plain file (built once, 8 bytes a record); None for gzip."""
        path = self.files[file_no]
        if _is_gzip(path):
            return None
        if file_no not in self._line_starts:
            starts, position = [], 0
            with open(path, "rb") as f:
                for line in f:
                    starts.append(position)
                    position += len(line)
            self._line_starts[file_no] = starts[self.headers[file_no]:]
        return self._line_starts[file_no]

    def read_data_by_index_range(self, start_index: int, end_index: int) -> list[str]:
        """Records [start_index, end_index) across the files, in file order (plain files: a seek, not a scan)."""
        return [line.decode("utf-8", "replace") for line in self.read_lines(start_index, end_index)]

    def read_lines(self, start_index: int, end_index: int) -> list[bytes]:
        """Records as undecoded bytes: a plain file's range is one read, split in C (no per-record checks needed)."""
        if start_index >= end_index:
            return []
        return self.read_block(start_index, end_index).split(b"\n")

    def read_block(self, start_index: int, end_index: int) -> bytes:
        """Records [start_index, end_index) as one newline-separated block (no trailing newline), left to split in
        the input pipeline: one read per plain file the range spans."""
        return b"\n".join(self._block_of_file(*segment) for segment in self._segments(start_index, end_index))

    def _segments(self, start_index: int, end_index: int) -> list[tuple[int, int, int]]:
        """(file number, first record in it, records) of each file the range spans."""
        if self._offsets is None:
            self.count_data()
        offsets = self._offsets
        segments = []
        index = start_index
        while index < end_index:
            file_no = bisect.bisect_right(offsets, index) - 1
            if file_no >= len(self.files):
                raise ReaderError(f"{self.describe()}: index {index} is past the last record ({offsets[-1]}).")
            take = min(end_index, offsets[file_no + 1]) - index
            segments.append((file_no, index - offsets[file_no], take))
            index += take
        return segments

    def _block_of_file(self, file_no: int, first: int, take: int) -> bytes:
        starts = self._starts(file_no)
        if starts is None:  # gzip: no offsets to seek to
            header = self.headers[file_no]
            with _open(self.files[file_no]) as f:
                lines = itertools.islice(f, first + header, first + header + take)
                return b"\n".join(line.rstrip(b"\r\n") for line in lines)
        end = starts[first + take] if first + take < len(starts) else None
        with open(self.files[file_no], "rb") as f:
            f.seek(starts[first])
            block = f.read() if end is None else f.read(end - starts[first])
        block = block.removesuffix(b"\n")
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n").removesuffix(b"\r")
        return block

    def first_record(self) -> bytes | None:
        """The first data line of the first non-empty file (for checks before training)."""
        for path, header in zip(self.files, self.headers):
            with _open(path) as f:
                lines = itertools.islice(f, header, header + 1)
                for line in lines:
                    return line.rstrip(b"\r\n")
        return None
