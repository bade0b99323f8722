"""A data set of a job: reader + columns + batching, turned into an input_fn.

`DataSetSpec` is the typed form of a conf's `train_set` / `eval_set` dict.
`DataSetInput` is the input_fn built from it: a tf.data pipeline of
`(features, labels)` batches, with malformed-record accounting.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf

from elastimator._validate import is_int
from elastimator.data import reader as readers
from elastimator.data.column import Column, check_columns
from elastimator.data.file_reader import FileReader
from elastimator.data.parsing import _FLOAT, _INT, SPARSE_DELIM, BadRecordTally, FilledFields, RecordParser
from elastimator.errors import ConfError, ElastimatorError, ReaderError
from elastimator.inputs.python_source import from_python

logger = logging.getLogger("elastimator")
_READ_AHEAD = 1 << 20


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSetSpec:
    """One data set of a job (the typed form of a conf's `train_set` / `eval_set`)."""

    reader: Any
    """A FileReader, another ElasticReader, or an object with iterator()."""
    columns: tuple[Column, ...]
    """Every field of a record, in order; exactly one is the label for training/evaluation."""
    batch_size: int = 128
    """Records per batch."""
    epoch: int | None = 1
    """Passes over the data; None repeats until max_steps."""
    field_delim: str | None = None
    """Field separator; None uses the FileReader's (tab for .tsv, else comma) or a comma."""
    shuffle: bool = False
    """Shuffle records (files are also visited in a new order each epoch)."""
    shuffle_buffer_size: int = 10_000
    """Records held for shuffling."""
    max_bad_records: int = 0
    """Malformed records that may be skipped (each is reported); one more stops the job."""
    shard_size: int | None = None
    """With a shard service: records per shard (default 10 batches)."""
    name: str = "data set"
    """Used in messages (e.g. "train_set")."""
    need_label: bool = True
    """Whether a label column is required."""

    def __post_init__(self):
        where = self.name
        readers.check_reader(self.reader, where)
        object.__setattr__(self, "columns", check_columns(self.columns, where, self.need_label))
        for key in ("batch_size", "shuffle_buffer_size"):
            _positive_int(where, key, getattr(self, key))
        if self.shard_size is not None:
            _positive_int(where, "shard_size", self.shard_size)
        if self.epoch is not None:
            _positive_int(where, "epoch", self.epoch)
        if isinstance(self.max_bad_records, bool) or not isinstance(self.max_bad_records, int) \
                or self.max_bad_records < 0:
            raise ConfError(f"{where}: 'max_bad_records' expected int >= 0; got {self.max_bad_records!r}.")
        if not isinstance(self.shuffle, bool):
            raise ConfError(f"{where}: 'shuffle' expected bool; got {self.shuffle!r}.")
        if self.field_delim is not None and (not isinstance(self.field_delim, str) or len(self.field_delim) != 1):
            raise ConfError(f"{where}: 'field_delim' expected one character; got {self.field_delim!r}.")
        # Only explicit delimiters: a FileReader's default needs its files, which may not exist yet.
        explicit = self.field_delim or (self.reader.configured_field_delim if isinstance(self.reader, FileReader)
                                        else None)
        if explicit == SPARSE_DELIM and any(c.is_sparse for c in self.columns):
            raise ConfError(f"{where}: field_delim '|' is also the separator of sparse columns; use another.")
        if isinstance(self.reader, FileReader):
            self.reader.use_header_rule(_header_rule(self.columns, self.field_delim))

    @property
    def delimiter(self) -> str:
        if self.field_delim is not None:
            return self.field_delim
        return self.reader.field_delim if isinstance(self.reader, FileReader) else ","

    @property
    def label(self) -> Column | None:
        return next((c for c in self.columns if c.is_label), None)

    @property
    def features(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.is_label)


def _positive_int(where, key, value):
    if not is_int(value, minimum=1):
        raise ConfError(f"{where}: {key!r} expected int > 0; got {value!r}.")


def _python_field_ok(column: Column, value: str) -> bool:
    value = value.strip()
    if not column.is_numeric or value == "":  # An empty field takes the column's default.
        return True
    pattern = _INT if column.dtype.is_integer else _FLOAT
    if column.is_sparse:
        return all(re.fullmatch(pattern, v) for v in value.split(SPARSE_DELIM) if v)
    return re.fullmatch(pattern, value) is not None


def _dtype_fix(column: Column, value: str) -> str:
    """What to do about a first record whose field is not of its column's dtype."""
    kind, dtype = ("a number with a fraction", "float32") if re.fullmatch(_FLOAT, value.strip()) else ("text", "string")
    return (f"If column {column.name!r} holds {kind} such as this, declare it with dtype {dtype!r} in the conf "
            f"(Column.create({column.name!r}, {dtype!r})); if this record is wrong, fix the data.")


def _header_rule(columns: tuple[Column, ...], field_delim: str | None):
    """Is a file's first line a header of these columns? Why, or None when it is a record."""
    names = [c.name.lower() for c in columns]
    numeric = [c for c in columns if c.is_numeric]

    def rule(line: bytes, reader_delim: str) -> str | None:
        fields = [f.strip() for f in line.decode("utf-8", "replace").split(field_delim or reader_delim)]
        if [f.lower() for f in fields] == names:
            return "it names the columns"
        if len(fields) != len(columns):
            # Not this data set's shape: a header only if no field is a number (else a malformed record).
            if numeric and not any(re.fullmatch(_FLOAT, f) for f in fields):
                return f"{len(fields)} fields and none is a number"
            return None
        for column, value in zip(columns, fields):
            if not _python_field_ok(column, value):
                return f"field {column.name!r} = {value[:40]!r} is not a valid {column.dtype.name}"
        return None

    return rule


class DataSetInput:
    """The input_fn of a data set; also keeps its malformed-record tally.

    Calling it (as an Estimator does) builds the tf.data pipeline. `check()`
    reads the first record in Python, so schema mistakes (a header line, the
    wrong delimiter, a column missing) stop the job before training starts.
    """

    def __init__(self, spec: DataSetSpec, shared_tally: Callable | None = None):
        """`shared_tally` adds malformed records to a count kept beyond this process (an elastic job's shard
        service keeps one for the whole job); see `BadRecordTally`."""
        self.spec = spec
        self._sources = self._source_names()
        self.tally = BadRecordTally(spec.max_bad_records, self._sources, shared=shared_tally)
        self.filled = FilledFields()
        self.reader_failure: ReaderError | None = None

    @property
    def failure(self) -> ElastimatorError | None:
        """What stopped this input, if anything: too many bad records, or a failing reader."""
        return self.tally.error or self.reader_failure

    def _source_names(self) -> list[str]:
        reader = self.spec.reader
        if isinstance(reader, FileReader):
            return reader.files
        return [readers.describe(reader)]

    # --- checks before training --------------------------------------------------------------

    def first_record(self) -> bytes | None:
        reader = self.spec.reader
        if isinstance(reader, FileReader):
            return reader.first_record()
        if isinstance(reader, readers.ElasticReader):
            if reader.data_nums == 0:
                return None
            return reader.read_lines(0, 1)[0]
        return None  # an iterator reader may be a live stream: do not consume from it

    def check(self) -> None:
        """Raises ReaderError for an empty data set or a first record that does not fit the columns."""
        spec = self.spec
        reader = spec.reader
        if isinstance(reader, readers.ElasticReader) and reader.data_nums == 0:
            raise ReaderError(f"{spec.name}: {readers.describe(reader)} has no records.")
        first = self.first_record()
        if first is None:
            return
        text = first.decode("utf-8", "replace")
        fields = text.split(spec.delimiter)
        hint = ""
        if isinstance(reader, FileReader) and reader.skip_header is False:
            hint = (" If the file starts with a header line, use FileReader(..., skip_header=True) (or None to "
                    "detect it).")
        if len(fields) != len(spec.columns):
            raise ReaderError(
                f"{spec.name}: the first record of {self._sources[0]} has {len(fields)} field(s) separated by "
                f"{spec.delimiter!r} but {len(spec.columns)} columns are declared "
                f"({', '.join(c.name for c in spec.columns)}). Record: {text[:200]!r}. Check field_delim and "
                f"the column list.{hint}"
            )
        for column, value in zip(spec.columns, fields):
            if not _python_field_ok(column, value):
                raise ReaderError(
                    f"{spec.name}: in the first record of {self._sources[0]}, field {column.name!r} = {value!r} is "
                    f"not a valid {column.dtype.name}. {_dtype_fix(column, value)}{hint}"
                )

    # --- the pipeline ------------------------------------------------------------------------

    def __call__(self, config=None) -> tf.data.Dataset:
        """The pipeline; `config` (the Estimator passes its RunConfig) is for inputs that depend on how many steps a
        session call runs (an elastic one does)."""
        del config
        spec = self.spec
        if isinstance(spec.reader, FileReader):
            batches = self._file_batches(spec.reader)
        else:
            batches = self._python_batches()
        dataset = batches.map(self.parser(), num_parallel_calls=tf.data.AUTOTUNE, deterministic=not spec.shuffle)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def parser(self) -> RecordParser:
        """What turns a batch of (source, record number, text) into (features, labels), counting bad records."""
        return RecordParser(self.spec.columns, self.spec.delimiter, self.tally, self.filled)

    def noting_failure(self, elements: Callable[[], Iterator]) -> Callable[[], Iterator]:
        """`elements` (a generator function), keeping a ReaderError it raises as this input's `reader_failure`."""
        def noted():
            try:
                yield from elements()
            except ReaderError as e:
                self.reader_failure = e
                raise

        return noted

    def _file_batches(self, reader: FileReader) -> tf.data.Dataset:
        spec = self.spec
        files = reader.files
        compression = "GZIP" if reader.compressed else ""
        headers = tf.constant(reader.headers, tf.int64)
        listing = tf.data.Dataset.from_tensor_slices((tf.range(len(files), dtype=tf.int32), files))
        if spec.shuffle:
            listing = listing.shuffle(len(files), reshuffle_each_iteration=True)
        listing = listing.repeat(spec.epoch)

        def numbered_lines(file_id, path):
            header = headers[file_id]
            lines = tf.data.TextLineDataset(path, compression_type=compression, buffer_size=_READ_AHEAD)
            return lines.skip(header).enumerate(start=1 + header), file_id

        if spec.shuffle:
            def per_record(file_id, path):
                lines, file_id = numbered_lines(file_id, path)
                return lines.map(lambda number, text: (file_id, number, text))

            records = listing.interleave(per_record, cycle_length=min(4, len(files)),
                                         num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
            return records.shuffle(spec.shuffle_buffer_size).batch(spec.batch_size)

        def per_file(file_id, path):
            # Batch within the file first: the per-record work stays in C++.
            lines, file_id = numbered_lines(file_id, path)
            return lines.batch(spec.batch_size).map(
                lambda number, text: (tf.fill(tf.shape(number), file_id), number, text))

        return listing.interleave(per_file, cycle_length=1).rebatch(spec.batch_size)

    def _python_records(self) -> Iterator[tuple[int, bytes]]:
        """(record number, text) from a Python reader, one epoch."""
        reader = self.spec.reader
        name = self._sources[0]
        if isinstance(reader, readers.ElasticReader):
            n, step = reader.data_nums, self.spec.batch_size
            starts = range(0, n, step)
            for start in starts:
                for offset, text in enumerate(reader.read_lines(start, min(n, start + step))):
                    yield start + offset + 1, text
            return
        try:
            iterator = reader.iterator()
        except Exception as e:  # noqa: BLE001 - user code; reported with context
            raise ReaderError(f"{name}.iterator() raised {e!r}.") from e
        number = 0
        while True:
            try:
                record = next(iterator)
            except StopIteration:
                return
            except Exception as e:  # noqa: BLE001
                raise ReaderError(f"{name}.iterator() raised {e!r} after {number} record(s).") from e
            number += 1
            yield number, readers.as_text(record, name)

    def _python_batches(self) -> tf.data.Dataset:
        spec = self.spec

        def batches():
            epoch = 0
            while spec.epoch is None or epoch < spec.epoch:
                numbers, texts = [], []
                for number, text in self._python_records():
                    numbers.append(number)
                    texts.append(text)
                    if len(texts) == spec.batch_size:
                        yield np.zeros(len(texts), np.int32), np.asarray(numbers, np.int64), np.asarray(texts)
                        numbers, texts = [], []
                if texts:
                    yield np.zeros(len(texts), np.int32), np.asarray(numbers, np.int64), np.asarray(texts)
                epoch += 1

        signature = (tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string))
        dataset = from_python(self.noting_failure(batches), signature, name="reader_batches")
        if spec.shuffle:
            dataset = dataset.unbatch().shuffle(spec.shuffle_buffer_size).batch(spec.batch_size)
        return dataset


def serving_input_receiver_fn(columns) -> Callable:
    """A serving receiver for the feature columns: one input per column, never the label.

    Dense columns take typed values; sparse columns take their field text
    ("a|b|c"), parsed exactly as in the files. The placeholders live under
    `serving_input/`, so a model variable named like a column (`x`) keeps its
    name, and its checkpoint value, in the export graph.
    """
    features_only = tuple(c for c in columns if not c.is_label)

    def receiver_fn():
        from elastimator.export.receivers import ServingInputReceiver

        inputs, features = {}, {}
        parser = RecordParser(features_only, ",", BadRecordTally(0, ["serving"]))
        with tf.compat.v1.name_scope("serving_input"):
            for column in features_only:
                if column.is_sparse:
                    inputs[column.name] = tf.compat.v1.placeholder(tf.string, [None], name=column.name)
                    features[column.name] = parser.convert(column, inputs[column.name])
                else:
                    inputs[column.name] = tf.compat.v1.placeholder(column.dtype, [None], name=column.name)
                    features[column.name] = inputs[column.name]
        return ServingInputReceiver(features, inputs)

    return receiver_fn
