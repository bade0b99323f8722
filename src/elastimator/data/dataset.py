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
from elastimator.elastic.shards import SHARD_TAG
from elastimator.errors import ConfError, ElastimatorError, ReaderError
from elastimator.estimator.training_step import StepInput
from elastimator.inputs.python_source import from_python

logger = logging.getLogger("elastimator")
_READ_AHEAD = 1 << 20
_ELASTIC_READ_BYTES = 4 << 20
"""About how much text an elastic input reads from a FileReader in one Python call, in whole batches."""
_ELASTIC_READ_MAX_BATCHES = 16


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

    def __init__(self, spec: DataSetSpec, feed=None):
        """`feed` (an elastic ShardFeed) makes an ElasticReader read the ranges a shard service hands out."""
        self.spec = spec
        self.feed = feed
        if feed is not None and not isinstance(spec.reader, readers.ElasticReader):
            raise ReaderError(f"{spec.name}: elastic sharding needs an ElasticReader (or FileReader); got "
                              f"{readers.describe(spec.reader)}.")
        self._sources = self._source_names()
        self.tally = BadRecordTally(spec.max_bad_records, self._sources,
                                    shared=feed.report_bad if feed is not None else None)
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
                    f"not a valid {column.dtype.name}.{hint}"
                )

    # --- the pipeline ------------------------------------------------------------------------

    def __call__(self, config=None) -> tf.data.Dataset:
        """The pipeline; `config` (the Estimator passes its RunConfig) tells an elastic input how many steps a
        session call runs."""
        spec = self.spec
        parser = RecordParser(spec.columns, spec.delimiter, self.tally, self.filled)
        if self.feed is not None:
            # Deterministic, so each shard's batches reach the step (and the service) in order.
            tagged = self._elastic_batches().map(_tagged(parser), num_parallel_calls=tf.data.AUTOTUNE)
            batches = tagged.prefetch(tf.data.AUTOTUNE)
            if not _several_steps_per_call(config):
                # A call of one step has its batch's lease checked by the write gate right before it writes
                # (ShardReportHook): no Python call as the step takes its batch.
                return batches
            # A call of several steps passes the gate once, before its loop takes any batch: each batch is
            # checked as the loop takes it (last, with no prefetch injected after it), and one the service took
            # back while it waited is dropped.
            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False
            return batches.filter(_still_leased(self.feed)).with_options(options)
        if isinstance(spec.reader, FileReader):
            batches = self._file_batches(spec.reader)
        else:
            batches = self._python_batches()
        dataset = batches.map(parser, num_parallel_calls=tf.data.AUTOTUNE, deterministic=not spec.shuffle)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def _elastic_batches(self) -> tf.data.Dataset:
        """Batches of the shards the service hands this process, tagged [shard id, lease, first record, records].

        A FileReader's records come as blocks of text, each several batches long (one Python call and one read per
        file per block), split into records and batches in the pipeline (in C++, off the Python thread); bad
        records are named by file and line. Other readers' records come a batch per call."""
        reader = self.spec.reader
        batch_size = self.spec.batch_size
        if not isinstance(reader, FileReader):
            def batches():
                for numbers, texts, tag in self.feed.batches(reader, batch_size):
                    yield np.zeros(len(texts), np.int32), numbers, texts, tag

            signature = (tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int64),
                         tf.TensorSpec([None], tf.string), tf.TensorSpec([4], tf.int64))
            return from_python(self._noting_failure(batches), signature, name="elastic_batches")

        per_read = _batches_per_read(reader, batch_size)

        def blocks():
            for start, end, tag in self.feed.ranges(batch_size, per_read):
                yield reader.read_block(start, end), tag

        def batches_of(block, tag):
            """The block's batches, each tagged with its own range and its records located (for bad records'
            messages)."""
            records = tf.strings.split(block, "\n")
            checked = tf.debugging.assert_equal(
                tf.size(records, out_type=tf.int64), tag[3],
                message="elastic input: a block read from the files split into a different number of records "
                        "than its range holds")
            with tf.control_dependencies([checked]):
                firsts = tf.range(0, tag[3], batch_size)

            def batch(first):
                count = tf.minimum(tag[3] - first, batch_size)
                batch_tag = tf.stack([tag[0], tag[1], tag[2] + first, count])
                files, lines = reader.locate(tf.range(batch_tag[2], batch_tag[2] + count))
                return files, lines, records[first:first + count], batch_tag

            return tf.data.Dataset.from_tensor_slices(firsts).map(batch)

        read = from_python(self._noting_failure(blocks), (tf.TensorSpec([], tf.string), tf.TensorSpec([4], tf.int64)),
                           name="elastic_blocks")
        return read.flat_map(batches_of)

    def _noting_failure(self, elements: Callable[[], Iterator]) -> Callable[[], Iterator]:
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
        dataset = from_python(self._noting_failure(batches), signature, name="reader_batches")
        if spec.shuffle:
            dataset = dataset.unbatch().shuffle(spec.shuffle_buffer_size).batch(spec.batch_size)
        return dataset


def _batches_per_read(reader: FileReader, batch_size: int) -> int:
    """How many batches an elastic input reads from `reader` in one call: about _ELASTIC_READ_BYTES of text."""
    batch_bytes = batch_size * reader.mean_record_bytes()
    if batch_bytes <= 0:
        return 1
    return int(max(1, min(_ELASTIC_READ_MAX_BATCHES, _ELASTIC_READ_BYTES // batch_bytes)))


def _tagged(parser: RecordParser):
    """Parses a tagged batch; the tag goes with it as a step output, for the hook that reports the batch."""
    def parse(sources, numbers, texts, tag):
        parsed = parser(sources, numbers, texts)
        features, labels = parsed if isinstance(parsed, tuple) else (parsed, None)
        return StepInput(features, labels, {SHARD_TAG: tag})

    return parse


def _several_steps_per_call(config) -> bool:
    """Whether training calls may run several steps: only with RunConfig.steps_per_execution > 1, since
    automatic sizing keeps one step per call wherever a hook reports per call, as the shard report hook does."""
    return (getattr(config, "steps_per_execution", None) or 1) > 1


def _still_leased(feed):
    """A filter keeping the batches whose shard lease the service has not taken back."""
    def current(tag):
        return np.bool_(feed.is_current(int(tag[1])))

    def keep(element: StepInput):
        kept = tf.numpy_function(current, [element.step_outputs[SHARD_TAG]], tf.bool, stateful=True,
                                 name="still_leased")
        kept.set_shape([])
        return kept

    return keep


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
