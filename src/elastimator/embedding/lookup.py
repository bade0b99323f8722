"""Reading rows of an embedding variable: `tf.nn.embedding_lookup` and `embedding_lookup_sparse` on one.

A lookup made for training admits the ids it has not seen (each starts from its initial row, see
`variable.py`), and returns the batch's distinct rows as one tensor that it registers as trainable:
the optimizer's gradient for that tensor is what `updates.py` applies to the tables, row by row.
A lookup made for evaluation or serving changes nothing and returns an unknown id's initial row.
"""

from __future__ import annotations

import dataclasses
import inspect
import weakref

import tensorflow as tf

from elastimator.embedding import context
from elastimator.embedding.variable import EmbeddingVariable, Partition


@dataclasses.dataclass(frozen=True)
class TrainedLookup:
    """The distinct rows one training lookup read, and which ids they belong to."""

    variable: EmbeddingVariable
    keys: tf.Tensor
    """The distinct ids, [n]."""
    admitted: tf.Tensor | None
    """[n] bool: ids a counter filter has admitted (None: all of them)."""


_trained: "weakref.WeakKeyDictionary[tf.Graph, dict[object, TrainedLookup]]" = weakref.WeakKeyDictionary()


def trained_lookup(rows) -> TrainedLookup | None:
    """The lookup whose distinct rows `rows` are, or None for anything else an optimizer is given."""
    if not isinstance(rows, tf.Tensor) or not hasattr(rows, "graph"):
        return None
    return _trained.get(rows.graph, {}).get(rows.ref())


def unlist_trainable_rows(graph: tf.Graph) -> None:
    """Takes `graph`'s training lookups' rows out of its trainable-variables collection."""
    rows = _trained.get(graph, {})
    if rows:
        trainable = graph.get_collection_ref(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
        trainable[:] = [v for v in trainable if not (isinstance(v, tf.Tensor) and v.ref() in rows)]


def _train_rows(variable: EmbeddingVariable, part: Partition, keys: tf.Tensor, counts: tf.Tensor):
    """The rows of `keys` for training, admitting new ids; (rows, admitted or None)."""
    option = variable.option
    admitted = None
    updates = []
    if part.seen is not None:
        seen = part.seen.lookup(keys)
        before = seen[:, 0]
        occurrences = before + tf.cast(counts, tf.int64)
        step = tf.cast(tf.compat.v1.train.get_or_create_global_step(), tf.int64)
        updates.append(part.seen.insert(keys, tf.stack([occurrences, tf.fill(tf.shape(occurrences), step)], 1)))
        if option.filter_freq > 1:
            admitted = occurrences >= option.filter_freq
    values = part.ids.lookup(keys)
    absent = tf.math.is_nan(values[:, 0])
    start = absent if admitted is None else tf.logical_and(absent, admitted)
    initial = variable.initial_rows(keys)
    updates.append(part.ids.insert(tf.boolean_mask(keys, start), tf.boolean_mask(initial, start)))
    rows = tf.where(absent[:, None], initial, values)
    if admitted is not None:
        refused = tf.constant(option.init_option.default_value_no_permission, variable.dtype)
        rows = tf.where(admitted[:, None], rows, tf.fill(tf.shape(rows), refused))
    with tf.control_dependencies(updates):
        return tf.identity(rows), admitted


def _serve_rows(variable: EmbeddingVariable, part: Partition, keys: tf.Tensor) -> tf.Tensor:
    values = part.ids.lookup(keys)
    return tf.where(tf.math.is_nan(values[:, :1]), variable.initial_rows(keys), values)


def _distinct_rows(variable: EmbeddingVariable, keys: tf.Tensor, counts: tf.Tensor, training: bool):
    """Rows of the distinct `keys` ([n], their `counts` in the batch), gathered over the partitions; with the
    ids a counter filter admitted (None: all of them)."""
    positions, parts = variable.split(keys, counts)
    rows, admitted = [], []
    for part, part_keys, part_counts in parts:
        with part.placed():
            if training:
                part_rows, part_admitted = _train_rows(variable, part, part_keys, part_counts)
            else:
                part_rows, part_admitted = _serve_rows(variable, part, part_keys), None
        rows.append(part_rows)
        admitted.append(part_admitted)
    if positions is None:
        return rows[0], admitted[0]
    stitched = tf.dynamic_stitch(positions, rows)
    return stitched, None if admitted[0] is None else tf.dynamic_stitch(positions, admitted)


def _keys(variable: EmbeddingVariable, ids) -> tf.Tensor:
    ids = tf.convert_to_tensor(ids)
    if (ids.dtype == tf.string) != (variable.key_dtype == tf.string):
        raise TypeError(f"Embedding variable {variable.name!r} has {variable.key_dtype.name} ids; got "
                        f"{ids.dtype.name} ids. Convert them first (tf.strings.to_number, or a string key_dtype).")
    return ids if ids.dtype == tf.string else tf.cast(ids, tf.int64)


def _clip(rows: tf.Tensor, max_norm) -> tf.Tensor:
    return rows if max_norm is None else tf.clip_by_norm(rows, max_norm, axes=[1])


def distinct_lookup(variable: EmbeddingVariable, flat_ids: tf.Tensor, max_norm=None):
    """(rows of the distinct ids, index of each id's row) for a 1-D id tensor."""
    keys, index, counts = tf.unique_with_counts(flat_ids, out_idx=tf.int64)
    rows, admitted = _distinct_rows(variable, keys, counts, context.current().training)
    rows = tf.identity(rows, name="rows")
    # Trainable in every mode, as a variable is: model_fns build their train_op in EVAL mode too.
    if variable.trainable:
        _trained.setdefault(rows.graph, {})[rows.ref()] = TrainedLookup(variable=variable, keys=keys,
                                                                        admitted=admitted)
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, rows)
    return _clip(rows, max_norm), index


def embedding_lookup(params: EmbeddingVariable, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
    """`tf.nn.embedding_lookup` on an embedding variable: one row per id, shape `ids.shape + [embedding_dim]`."""
    del partition_strategy, validate_indices  # ids are keys, not row numbers: any id is valid
    with tf.name_scope(name or "embedding_lookup"):
        ids = _keys(params, ids)
        rows, index = distinct_lookup(params, tf.reshape(ids, [-1]), max_norm)
        found = tf.gather(rows, index)
        return tf.reshape(found, tf.concat([tf.shape(ids, out_type=tf.int32), [params.embedding_dim]], 0))


def embedding_lookup_sparse(params: EmbeddingVariable, sp_ids: tf.SparseTensor, sp_weights=None,
                            partition_strategy="mod", name=None, combiner="mean", max_norm=None,
                            allow_fast_lookup=False):
    """`tf.nn.embedding_lookup_sparse` on an embedding variable: each row of `sp_ids` combined into one vector
    ("sum", "mean" or "sqrtn", optionally weighted by `sp_weights`); rows without ids are zeros."""
    del partition_strategy, allow_fast_lookup
    combiner = combiner or "mean"
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError(f"embedding_lookup_sparse: combiner must be 'sum', 'mean' or 'sqrtn'; got {combiner!r}.")
    with tf.name_scope(name or "embedding_lookup_sparse"):
        rows_of_batch = tf.shape(sp_ids, out_type=tf.int64)[0]
        segments = sp_ids.indices[:, 0]
        rows, index = distinct_lookup(params, _keys(params, sp_ids.values), max_norm)
        vectors = tf.gather(rows, index)
        if sp_weights is None:
            weights = tf.ones(tf.shape(segments), vectors.dtype)
        else:
            weights = tf.cast(sp_weights.values, vectors.dtype)
        summed = tf.math.unsorted_segment_sum(vectors * weights[:, None], segments, rows_of_batch)
        if combiner == "sum":
            return summed
        if combiner == "mean":
            total = tf.math.unsorted_segment_sum(weights, segments, rows_of_batch)
        else:
            total = tf.sqrt(tf.math.unsorted_segment_sum(weights * weights, segments, rows_of_batch))
        return tf.math.divide_no_nan(summed, total[:, None])


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None, combiner="mean",
                                 default_id=None, name=None, partition_strategy="div", max_norm=None,
                                 allow_fast_lookup=False):
    """`tf.nn.safe_embedding_lookup_sparse` on an embedding variable: like `embedding_lookup_sparse`, after
    dropping negative integer ids and empty strings; rows left without ids are zeros (`default_id` is a
    row number, which an embedding variable does not have, and is refused)."""
    if default_id is not None:
        raise ValueError("safe_embedding_lookup_sparse: default_id names a row number; an embedding variable is "
                         "keyed by id and has none. Leave it None (rows without ids become zeros).")
    ids = sparse_ids
    keep = tf.not_equal(ids.values, "") if ids.dtype == tf.string else tf.greater_equal(ids.values, 0)
    if sparse_weights is not None:
        keep = tf.logical_and(keep, tf.greater(sparse_weights.values, 0))
        sparse_weights = tf.sparse.retain(sparse_weights, keep)
    ids = tf.sparse.retain(ids, keep)
    return embedding_lookup_sparse(embedding_weights, ids, sparse_weights, name=name or "safe_embedding_lookup_sparse",
                                   combiner=combiner, max_norm=max_norm)


def _register_dispatch() -> None:
    """`tf.nn.embedding_lookup(embedding_variable, ids)` (v1 and v2 spellings) comes here: TensorFlow's
    type-based dispatch, which only acts when an argument is an EmbeddingVariable."""
    # Type-based dispatch looks only at types registered as dispatchable (ExtensionTypes are, automatically).
    from tensorflow.python.util import dispatch  # pylint: disable=import-outside-toplevel

    dispatch.register_dispatchable_type(EmbeddingVariable)
    targets = (
        (embedding_lookup, {"params": EmbeddingVariable}, (tf.nn.embedding_lookup, tf.compat.v1.nn.embedding_lookup)),
        (embedding_lookup_sparse, {"params": EmbeddingVariable},
         (tf.nn.embedding_lookup_sparse, tf.compat.v1.nn.embedding_lookup_sparse)),
        (safe_embedding_lookup_sparse, {"embedding_weights": EmbeddingVariable},
         (tf.nn.safe_embedding_lookup_sparse, tf.compat.v1.nn.safe_embedding_lookup_sparse)),
    )
    for function, signature, apis in targets:
        for api in apis:
            tf.experimental.dispatch_for_api(api, signature)(_adapt(function, api))


def _adapt(function, api):
    """`function` under `api`'s parameter names (v1 and v2 spell some differently)."""
    ours = set(inspect.signature(function).parameters)

    def dispatched(*args, **kwargs):
        bound = inspect.signature(api).bind(*args, **kwargs)
        return function(**{k: v for k, v in bound.arguments.items() if k in ours})

    dispatched.__signature__ = inspect.signature(api)
    dispatched.__name__ = function.__name__
    return dispatched


_register_dispatch()
