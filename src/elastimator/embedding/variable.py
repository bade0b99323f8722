"""Embedding variables: tables keyed by the raw feature id, growing as ids arrive, partitioned over the ps.

An `EmbeddingVariable` is DeepRec's `tf.get_embedding_variable` on stock TensorFlow. Each partition
holds, on one device (a parameter server in a cluster):

* `ids`: a mutable hash table from id to its row (`embedding_dim` floats). An id absent from it
  reads as NaN, which is how a lookup tells a new id from a trained one;
* `seen` (only with a counter filter or eviction): id -> [occurrences, last global step];
* one table per optimizer slot (Adam's m and v, Adagrad's accumulator, ...), made when the
  optimizer first updates the variable.

An id belongs to partition `id mod partitions` (a string id: its fingerprint hash). Memory grows
with the ids, not with a bucket count, and two ids never share a row. Every table is checkpointed
with the model (TensorFlow's `SAVEABLE_OBJECTS`), so ids, rows and slots survive a restart.

A new id starts from row `id mod default_value_dim` of `default_rows`, rows drawn from the
initializer once and saved with the model; a served model returns that row for an id it never saw.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import weakref
from typing import Any, Callable, Iterator

import tensorflow as tf

from elastimator._validate import is_int
from elastimator.embedding import context
from elastimator.embedding.options import EmbeddingVariableOption, GlobalStepEvict
from elastimator.errors import ConfigError

_log = logging.getLogger("elastimator.embedding")

_NOMINAL_ROWS = 1 << 30
"""The row count a partitioner is asked to split: embedding variables have no fixed size, and a
size-based partitioner (min_max_variable_partitioner) should see a large table."""

_KEY_DTYPES = (tf.int64, tf.int32, tf.string)

_registry: "weakref.WeakKeyDictionary[tf.Graph, dict[str, EmbeddingVariable]]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class Partition:
    """One partition's tables, all on `device`."""

    index: int
    device: str | None
    ids: Any
    """id -> row; NaN for an absent id."""
    seen: Any | None
    """id -> [occurrences, last global step], when a filter or eviction needs it."""
    slots: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Optimizer slot tables by name (e.g. "Adam/m"); filled when the optimizer is built."""

    def placed(self):
        """The device scope of this partition's ops (none when the tables are local)."""
        return _on_device(self.device)

    def tables(self) -> list:
        return [t for t in (self.ids, self.seen, *self.slots.values()) if t is not None]


@contextlib.contextmanager
def _on_device(device: str | None) -> Iterator[None]:
    """Ops made inside go to `device` (nowhere in particular when None).

    `device(None)` first: the engine's replica device setter would otherwise send each table to a parameter
    server of its own choosing, splitting one partition over several.
    """
    if not device:
        yield
        return
    with tf.compat.v1.get_default_graph().device(None), tf.compat.v1.device(device):
        yield


class EmbeddingVariable:
    """A dynamic embedding table (see the module doc). Made by `get_embedding_variable`; read with
    `tf.nn.embedding_lookup(variable, ids)` or `embedding_lookup_sparse`."""

    def __init__(self, *, name: str, embedding_dim: int, key_dtype: tf.DType, value_dtype: tf.DType,
                 initializer: Callable, partitions: int, option: EmbeddingVariableOption, trainable: bool,
                 num_ps: int):
        self.name = name
        self.embedding_dim = embedding_dim
        self.key_dtype = key_dtype
        self.dtype = value_dtype
        self.option = option
        self.trainable = trainable
        self.graph = tf.compat.v1.get_default_graph()
        default_dim = option.init_option.default_value_dim
        devices = [f"/job:ps/task:{i % num_ps}" if num_ps else None for i in range(partitions)]
        # Names are absolute (the variable scope is already in `name`), not nested in the current name scope.
        with self.graph.name_scope(None), _on_device(devices[0]):
            self.default_rows = tf.compat.v1.Variable(
                lambda: tf.cast(initializer([default_dim, embedding_dim], dtype=value_dtype), value_dtype),
                trainable=False, name=f"{name}/default_rows", collections=[tf.compat.v1.GraphKeys.GLOBAL_VARIABLES])
        absent = tf.constant([float("nan")] * embedding_dim, value_dtype)
        needs_seen = option.filter_freq > 1 or option.steps_to_live is not None
        with self.graph.name_scope(None):
            self.partitions: tuple[Partition, ...] = tuple(
                self._partition(i, devices[i], absent, needs_seen) for i in range(partitions))

    def _partition(self, index: int, device: str | None, absent: tf.Tensor, needs_seen: bool) -> Partition:
        with _on_device(device):
            ids = tf.lookup.experimental.MutableHashTable(self.key_dtype, self.dtype, absent,
                                                          name=f"{self.name}/part_{index}/ids")
            seen = tf.lookup.experimental.MutableHashTable(
                self.key_dtype, tf.int64, tf.constant([0, -1], tf.int64),
                name=f"{self.name}/part_{index}/seen") if needs_seen else None
        return Partition(index=index, device=device, ids=ids, seen=seen)

    @property
    def shape(self) -> tf.TensorShape:
        """[None, embedding_dim]: the number of rows is the number of ids, known only at run time."""
        return tf.TensorShape([None, self.embedding_dim])

    def partition_of(self, keys: tf.Tensor) -> tf.Tensor:
        """The partition (int32) each id belongs to."""
        count = len(self.partitions)
        if self.key_dtype == tf.string:
            return tf.cast(tf.strings.to_hash_bucket_fast(keys, count), tf.int32)
        return tf.cast(tf.math.floormod(keys, tf.cast(count, keys.dtype)), tf.int32)

    def split(self, keys: tf.Tensor, *values: tf.Tensor) -> tuple[tf.Tensor | None, list[tuple]]:
        """`keys` and `values` (one row each per key) by partition.

        Returns:
            The position of each partition's keys in `keys` (None for one partition, whose keys are all of
            them, in order, for `tf.dynamic_stitch`), and per partition `(partition, its keys, *its values)`.
        """
        count = len(self.partitions)
        if count == 1:
            return None, [(self.partitions[0], keys, *values)]
        which = self.partition_of(keys)
        positions = tf.dynamic_partition(tf.range(tf.size(keys)), which, count)
        pieces = [tf.dynamic_partition(t, which, count) for t in (keys, *values)]
        return positions, [(part, *(piece[i] for piece in pieces)) for i, part in enumerate(self.partitions)]

    def initial_rows(self, keys: tf.Tensor) -> tf.Tensor:
        """Each id's first row: row `id mod default_value_dim` of `default_rows`."""
        count = self.option.init_option.default_value_dim
        if self.key_dtype == tf.string:
            index = tf.strings.to_hash_bucket_fast(keys, count)
        else:
            index = tf.math.floormod(tf.cast(keys, tf.int64), count)
        return tf.gather(self.default_rows, index)

    def slot(self, partition: Partition, name: str, initial: float) -> Any:
        """The slot table `name` of `partition`, made on first use; an id absent from it reads as `initial`."""
        if name not in partition.slots:
            with tf.init_scope(), self.graph.name_scope(None), partition.placed():
                partition.slots[name] = tf.lookup.experimental.MutableHashTable(
                    self.key_dtype, self.dtype, tf.constant([initial] * self.embedding_dim, self.dtype),
                    name=f"{self.name}/part_{partition.index}/{name}")
        return partition.slots[name]

    def size(self) -> tf.Tensor:
        """How many ids have a row (summed over partitions)."""
        return tf.add_n([tf.cast(p.ids.size(), tf.int64) for p in self.partitions])

    def __repr__(self) -> str:
        return (f"<EmbeddingVariable {self.name!r} dim={self.embedding_dim} key_dtype={self.key_dtype.name} "
                f"partitions={len(self.partitions)}>")


_IDS_KEY = re.compile(r"^(?P<name>.+)/part_\d+/ids-keys$")


def ids_in_checkpoint(checkpoint: str) -> dict[str, int]:
    """How many ids each embedding variable saved in `checkpoint` has a row for (summed over partitions)."""
    counts: dict[str, int] = {}
    for key, shape in tf.train.list_variables(checkpoint):
        match = _IDS_KEY.match(key)
        if match:
            counts[match["name"]] = counts.get(match["name"], 0) + int(shape[0])
    return counts


def embedding_variables(graph: tf.Graph | None = None) -> list[EmbeddingVariable]:
    """The embedding variables built in `graph` (the default graph), in the order they were made."""
    graph = graph or tf.compat.v1.get_default_graph()
    return list(_registry.get(graph, {}).values())


def _partition_count(partitioner, dim: int, dtype: tf.DType) -> int:
    if partitioner is None:
        return 1
    slices = partitioner(shape=tf.TensorShape([_NOMINAL_ROWS, dim]), dtype=dtype)
    count = int(list(slices)[0])
    # fixed_size_partitioner(num_shards=len(ps)) on a job without parameter servers asks for 0: one partition.
    return max(1, count)


def _unsupported(name: str, value: Any, advice: str) -> None:
    if value is not None:
        raise ConfigError(f"get_embedding_variable: {name}={value!r} is not supported for embedding variables; "
                          f"{advice}")


def get_embedding_variable(name: str, embedding_dim: int, key_dtype=tf.int64, value_dtype=None, initializer=None,
                           regularizer=None, trainable: bool = True, collections=None, caching_device=None,
                           partitioner=None, validate_shape: bool = True, custom_getter=None, constraint=None,
                           steps_to_live: int | None = None, init_data_source=None,
                           ev_option: EmbeddingVariableOption | None = None) -> EmbeddingVariable:
    """Gets or makes the embedding variable `name` in the current variable scope (DeepRec's signature).

    Like `tf.compat.v1.get_variable`, a second call with the same name returns the same variable when
    the scope reuses variables (`reuse=True` or `tf.compat.v1.AUTO_REUSE`) and is an error otherwise.
    The scope's partitioner and initializer apply when none is given.

    Args:
        name: the variable's name within the current variable scope.
        embedding_dim: the length of each id's row.
        key_dtype: the ids' dtype: tf.int64, tf.int32 or tf.string.
        value_dtype: the rows' dtype (float32).
        initializer: where new rows start (see `InitializerOption`); Glorot uniform by default.
        trainable: whether lookups made for training are trained.
        partitioner: splits the table into partitions, spread over the parameter servers; e.g.
            `tf.compat.v1.fixed_size_partitioner(num_shards=ps_count)`.
        steps_to_live: DeepRec's older spelling of `GlobalStepEvict(steps_to_live)`.
        ev_option: filter, eviction and initialization options.
        regularizer, constraint, init_data_source: not supported (an error says so).
        collections, caching_device, validate_shape, custom_getter: accepted and unused (they concern
            dense variables).

    Returns:
        The EmbeddingVariable.

    Raises:
        ConfigError: for an invalid argument, a name that exists in a scope that does not reuse, or a model
            built over several replicas of a strategy.
    """
    del collections, caching_device, validate_shape, custom_getter
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    if replicas > 1:
        raise ConfigError(
            f"get_embedding_variable({name!r}): the model is built over {replicas} replicas (RunConfig "
            "train_distribute), and a strategy does not mirror embedding variables: each replica would train a "
            "table of its own. Train them with parameter servers (TF_CONFIG, `elastimator launch`), or leave "
            "train_distribute None.")
    if not is_int(embedding_dim, minimum=1):
        raise ConfigError(f"get_embedding_variable({name!r}): embedding_dim must be a positive int; got "
                          f"{embedding_dim!r}.")
    key_dtype = tf.as_dtype(key_dtype)
    if key_dtype not in _KEY_DTYPES:
        raise ConfigError(f"get_embedding_variable({name!r}): key_dtype must be one of int64, int32, string; got "
                          f"{key_dtype.name}.")
    if key_dtype == tf.int32:
        key_dtype = tf.int64  # ids are widened once, so int32 and int64 ids of the same value share a row
    value_dtype = tf.as_dtype(value_dtype or tf.float32)
    if value_dtype != tf.float32:
        raise ConfigError(f"get_embedding_variable({name!r}): value_dtype must be float32; got {value_dtype.name}.")
    _unsupported("regularizer", regularizer, "regularize the looked-up rows in your model_fn instead.")
    _unsupported("constraint", constraint, "clip the looked-up rows (embedding_lookup's max_norm) instead.")
    _unsupported("init_data_source", init_data_source, "warm-start from a checkpoint instead.")
    option = ev_option if ev_option is not None else EmbeddingVariableOption()
    if not isinstance(option, EmbeddingVariableOption):
        raise ConfigError(f"get_embedding_variable({name!r}): ev_option must be an EmbeddingVariableOption; got "
                          f"{type(option).__name__}.")
    if steps_to_live is not None and option.evict_option is None:
        option = dataclasses.replace(option, evict_option=GlobalStepEvict(steps_to_live))

    scope = tf.compat.v1.get_variable_scope()
    full_name = f"{scope.name}/{name}" if scope.name else name
    graph = tf.compat.v1.get_default_graph()
    made = _registry.setdefault(graph, {})
    if full_name in made:
        if scope.reuse:
            return made[full_name]
        raise ConfigError(f"Embedding variable {full_name!r} already exists. To share it, open its variable scope "
                          "with reuse=True or reuse=tf.compat.v1.AUTO_REUSE; to make another, give it another name.")
    if scope.reuse is True:  # AUTO_REUSE makes what is missing; True only reuses, as get_variable does
        raise ConfigError(f"Embedding variable {full_name!r} does not exist, and its variable scope has reuse=True. "
                          "Make it first, or use reuse=tf.compat.v1.AUTO_REUSE.")
    storage = option.storage_option.storage_type
    if storage is not None and "DRAM" not in str(storage).upper():
        _log.info("Embedding variable %r: storage_type %s is DeepRec's; elastimator keeps the table in memory.",
                  full_name, storage)
    chosen = option.init_option.initializer or initializer or scope.initializer
    if chosen is None:
        chosen = tf.compat.v1.glorot_uniform_initializer()
    build = context.current()
    variable = EmbeddingVariable(
        name=full_name, embedding_dim=embedding_dim, key_dtype=key_dtype, value_dtype=value_dtype,
        initializer=chosen, partitions=_partition_count(partitioner or scope.partitioner, embedding_dim, value_dtype),
        option=option, trainable=trainable, num_ps=build.num_ps)
    made[full_name] = variable
    return variable
