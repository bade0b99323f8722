"""A data set's input for an elastic job: the shards a shard service hands this process, read, parsed and tagged.

`ShardedInput` is a `data.DataSetInput` whose records come from `ShardFeed`: each batch carries its tag
[shard id, lease, first record, records] as a step output (`SHARD_TAG`), for the hook that reports it once
trained (`feed.ShardReportHook`), and a batch whose lease the service took back is dropped before it trains.
Malformed records count toward one tally for the whole job, kept by the service.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from elastimator.data import reader as readers
from elastimator.data.dataset import DataSetInput, DataSetSpec
from elastimator.data.file_reader import FileReader
from elastimator.data.parsing import RecordParser
from elastimator.elastic.feed import ShardFeed
from elastimator.elastic.shards import SHARD_TAG
from elastimator.errors import ReaderError
from elastimator.estimator import StepInput
from elastimator.inputs.python_source import from_python

_ELASTIC_READ_BYTES = 4 << 20
"""About how much text an elastic input reads from a FileReader in one Python call, in whole batches."""
_ELASTIC_READ_MAX_BATCHES = 16


class ShardedInput(DataSetInput):
    """The input_fn of a data set sharded by a shard service (`feed`); its reader must be an ElasticReader (a
    FileReader is one), which reads the index ranges the service hands out."""

    def __init__(self, spec: DataSetSpec, feed: ShardFeed):
        if not isinstance(spec.reader, readers.ElasticReader):
            raise ReaderError(f"{spec.name}: elastic sharding needs an ElasticReader (or FileReader); got "
                              f"{readers.describe(spec.reader)}.")
        super().__init__(spec, shared_tally=feed.report_bad)
        self.feed = feed

    def __call__(self, config=None) -> tf.data.Dataset:
        """The pipeline; `config` (the Estimator passes its RunConfig) tells how many steps a session call runs."""
        # Deterministic, so each shard's batches reach the step (and the service) in order.
        tagged = self._elastic_batches().map(_tagged(self.parser()), num_parallel_calls=tf.data.AUTOTUNE)
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
            return from_python(self.noting_failure(batches), signature, name="elastic_batches")

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

        read = from_python(self.noting_failure(blocks), (tf.TensorSpec([], tf.string), tf.TensorSpec([4], tf.int64)),
                           name="elastic_blocks")
        return read.flat_map(batches_of)


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
