"""Parsing delimited records into features and labels, inside the tf.data graph.

A batch of lines is split, checked and converted with a handful of vectorized
ops. Records with the wrong number of fields, or a field that is not a number
where the column wants one, are never turned into zeros: they are counted and
reported (file and line) by a `BadRecordTally`, and either skipped (up to its
limit) or the input stops with a `ReaderError`. An empty field takes its column's
default, as `decode_csv`'s record defaults do (0 for a numeric column without
one); `FilledFields` counts those per column, so the job can say how many.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from elastimator.data.column import Column
from elastimator.errors import ReaderError

logger = logging.getLogger("elastimator")

_INT = r"[-+]?\d+"
_FLOAT = r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"
SPARSE_DELIM = "|"
_EXAMPLES_KEPT = 10
BAD_RECORDS_HINT = "Fix the data, or set a larger max_bad_records in the data set's conf to skip them."


class BadRecordTally:
    """Counts malformed records of one input and decides when to stop.

    A record is counted once, however many epochs meet it again. With `shared`
    (an elastic input's `ShardFeed.report_bad`) the count is the job's: the shard
    service keeps the distinct bad records every process found, so restarts and
    replayed batches count nothing twice, and the first record past the limit
    stops every process.

    Args:
        max_bad_records: How many malformed records may be skipped; one more stops the input.
        sources: Names of the record sources (files), indexed by source id.
        shared: Adds [(where, why)] to the job-wide count; returns it and, past the limit, why the input failed.
    """

    def __init__(self, max_bad_records: int, sources: Sequence[str],
                 shared: Callable[[list[tuple[str, str]], int], tuple[int, str | None]] | None = None):
        self.max_bad_records = max_bad_records
        self.sources = list(sources)
        self._shared = shared
        self.count = 0
        """Distinct malformed records this process met."""
        self.job_count: int | None = None
        """Distinct malformed records the whole job met (with `shared`), as of this process's last report."""
        self.examples: list[str] = []
        self._seen: set[tuple[int, int]] = set()
        self.error: ReaderError | None = None
        self._lock = threading.Lock()

    def record(self, sources, line_numbers, field_counts, encodings_ok, bad_columns, texts, expected_fields: int,
               column_names: Sequence[str], column_types: Sequence[str]) -> None:
        """Counts one batch's malformed records; raises ReaderError past the limit."""
        with self._lock:
            found: list[tuple[str, str]] = []
            rows = zip(sources, line_numbers, field_counts, encodings_ok, bad_columns, texts)
            for source, line, fields, encoding_ok, column, text in rows:
                key = (int(source), int(line))
                if key in self._seen and self._shared is None:
                    continue
                where = f"{self.sources[key[0]]}:{key[1]}"
                if not encoding_ok:
                    why = "not valid UTF-8"
                elif fields != expected_fields:
                    why = f"expected {expected_fields} fields, got {int(fields)}"
                else:
                    value = text.decode("utf-8", "replace")
                    why = f"field {column_names[column]!r} = {value!r} is not a valid {column_types[column]}"
                # The job-wide count hears every one, met before or not: a rewind may have made it forget.
                found.append((where, why))
                if key in self._seen:
                    continue
                self._seen.add(key)
                self.count += 1
                if len(self.examples) < _EXAMPLES_KEPT:
                    self.examples.append(f"{where}: {why}")
                    logger.warning("Bad record %s: %s", where, why)
            if self._shared is not None:
                if found:
                    self.job_count, failure = self._shared(found, self.max_bad_records)
                    if failure is not None:
                        self.error = ReaderError(f"{failure} {BAD_RECORDS_HINT}")
                        raise self.error
            elif self.count > self.max_bad_records:
                self.error = ReaderError(
                    f"{self.count} malformed record(s), more than max_bad_records={self.max_bad_records}. "
                    f"First ones: {'; '.join(self.examples[:5])}. {BAD_RECORDS_HINT}"
                )
                raise self.error

    def summary(self) -> str:
        return f"{self.count} malformed record(s) skipped" if self.count else "no malformed records"


class FilledFields:
    """How many empty fields took their column's default, per column (as read; a replayed batch counts again)."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, names: Sequence[str], counts) -> None:
        with self._lock:
            for name, count in zip(names, counts):
                if count:
                    self.counts[name] = self.counts.get(name, 0) + int(count)


def _valid_utf8(texts: tf.Tensor) -> tf.Tensor:
    """True where the bytes are valid UTF-8: transcoding them changes nothing."""
    return tf.equal(tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace"), texts)


class RecordParser:
    """Turns batches of (source id, line number, text) into (features, labels)."""

    def __init__(self, columns: Sequence[Column], field_delim: str, tally: BadRecordTally,
                 filled: FilledFields | None = None):
        self.columns = tuple(columns)
        self.delim = field_delim
        self.tally = tally
        self.filled = filled
        self._label = next((c for c in self.columns if c.is_label), None)
        self._has_strings = any(not c.is_numeric for c in self.columns)
        # Columns where an empty field becomes a value (a sparse field becomes an empty list instead).
        self._fillable = [j for j, c in enumerate(self.columns)
                          if not c.is_sparse and (c.is_numeric or c.has_default)]

    def _count_filled(self, counts: np.ndarray) -> np.int32:
        self.filled.add([self.columns[j].name for j in self._fillable], counts)
        return np.int32(0)

    def _report(self, sources, lines, counts, encodings_ok, bad_columns, texts):
        self.tally.record(sources.numpy(), lines.numpy(), counts.numpy(), encodings_ok.numpy(), bad_columns.numpy(),
                          texts.numpy(),
                          len(self.columns), [c.name for c in self.columns],
                          [c.dtype.name + (" list" if c.is_sparse else "") for c in self.columns])
        return np.int32(0)

    def _field_checks(self, fields: tf.Tensor) -> tf.Tensor:
        """[batch, columns] bool: does each field fit its column?"""
        checks = []
        for j, column in enumerate(self.columns):
            value = fields[:, j]
            if not column.is_numeric:
                ok = tf.ones_like(value, dtype=tf.bool)
            else:
                pattern = _INT if column.dtype.is_integer else _FLOAT
                if column.is_sparse:
                    pattern = f"(({pattern})(\\{SPARSE_DELIM}({pattern}))*)?"
                ok = tf.strings.regex_full_match(value, pattern)
                if not column.is_sparse:
                    ok = ok | tf.equal(value, "")  # Takes the column's default (0 without one).
            checks.append(ok)
        return tf.stack(checks, axis=1)

    def convert(self, column: Column, value: tf.Tensor):
        """One column of good fields -> its typed tensor (SparseTensor for sparse columns)."""
        if column.is_sparse:
            parts = tf.strings.split(value, sep=SPARSE_DELIM)
            parts = tf.ragged.boolean_mask(parts, tf.not_equal(parts, ""))
            if column.is_numeric:
                parts = tf.strings.to_number(parts, out_type=column.dtype)
            return parts.to_sparse()
        if not column.is_numeric:
            if column.has_default:
                value = tf.where(tf.equal(value, ""), column.default, value)
            return value
        default = str(column.default) if column.has_default else "0"
        return tf.strings.to_number(tf.where(tf.equal(value, ""), default, value), out_type=column.dtype)

    def __call__(self, sources: tf.Tensor, line_numbers: tf.Tensor, texts: tf.Tensor):
        texts = tf.strings.regex_replace(texts, "\r$", "")
        split = tf.strings.split(texts, sep=self.delim)
        counts = tf.cast(split.row_lengths(), tf.int32)
        fields = tf.strings.strip(split.to_tensor(default_value="", shape=[None, len(self.columns)]))
        valid = self._field_checks(fields)
        ok = tf.equal(counts, len(self.columns)) & tf.reduce_all(valid, axis=1)
        # Numeric fields with bad bytes already fail their pattern; string fields need the check.
        utf8_ok = _valid_utf8(texts) if self._has_strings else tf.ones_like(ok)
        ok = ok & utf8_ok
        bad = tf.where(~ok)[:, 0]

        def report():
            bad_column = tf.argmax(tf.cast(~tf.gather(valid, bad), tf.int32), axis=1, output_type=tf.int32)
            bad_text = tf.gather_nd(tf.gather(fields, bad), tf.stack([tf.range(tf.size(bad), dtype=tf.int32),
                                                                       bad_column], axis=1))
            return tf.py_function(self._report, [tf.gather(sources, bad), tf.gather(line_numbers, bad),
                                                 tf.gather(counts, bad), tf.gather(utf8_ok, bad), bad_column,
                                                 bad_text], tf.int32)

        reported = tf.cond(tf.size(bad) > 0, report, lambda: tf.constant(0))
        with tf.control_dependencies([reported]):
            good = tf.boolean_mask(fields, ok)
        if self.filled is not None and self._fillable:
            empty = tf.equal(tf.gather(good, self._fillable, axis=1), "")
            counts = tf.reduce_sum(tf.cast(empty, tf.int64), axis=0)
            counted = tf.cond(tf.reduce_any(empty),
                              lambda: tf.numpy_function(self._count_filled, [counts], tf.int32, stateful=True),
                              lambda: tf.constant(0))
            with tf.control_dependencies([counted]):
                good = tf.identity(good)
        features = {}
        labels = None
        for j, column in enumerate(self.columns):
            value = self.convert(column, good[:, j])
            if column.is_label:
                labels = value
            else:
                features[column.name] = value
        return (features, labels) if self._label is not None else features
