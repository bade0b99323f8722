"""Session callables whose executors TensorFlow builds when they are made, not at their first call.

`Session.make_callable` in TensorFlow 2 returns a function that calls
`Session.run`: the executors for those fetches (Grappler's rewrite of the
graph, its partition, oneDNN's layout pass, the kernels) are built by the
first call, on the caller's thread, inside the first batch (docs/performance.md, "Costs behind the engine's choices").

`made_now` asks TensorFlow's `Session::MakeCallable` directly, which builds
them as it is called, without the GIL: a kept graph makes its callables on a
thread while the checkpoint is restored (warm_graphs; the graph is finalized
before its session is made). A session builds one set of
executors at a time, so only work that is not another executor's build
(Python, a running step) overlaps with it.

A callable returns what `Session.run(fetches)` returns: the same structure,
numpy values of the same types, None for an op, and an op's failure raised
as `Session.run` raises it.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2

from elastimator.estimator import tf_internals

_LEAVES = (tf.Tensor, tf.Operation, tf.Variable, str)


def made_now(session: tf.compat.v1.Session, fetches: Any) -> Callable[[], Any]:
    """A callable running `fetches` (a structure of tensors, ops, variables or their names) in `session`, its
    executors built now. A structure with anything else (a SparseTensor), or one tf.nest does not take, gets
    `Session.make_callable`'s, built at its first call."""
    try:
        leaves = tf.nest.flatten(fetches)
    except (TypeError, ValueError):  # a structure tf.nest does not take (keys that do not sort): Session.run's
        return session.make_callable(fetches)
    if not all(isinstance(leaf, _LEAVES) for leaf in leaves):
        return session.make_callable(fetches)
    graph = session.graph
    elements = [graph.as_graph_element(leaf, allow_tensor=True, allow_operation=True) for leaf in leaves]
    names = list(dict.fromkeys(e.name for e in elements if isinstance(e, tf.Tensor)))  # each tensor once
    options = config_pb2.CallableOptions(fetch=names, target=list(dict.fromkeys(
        e.name for e in elements if isinstance(e, tf.Operation))))
    # Session::MakeCallable; _do_call gives a failure to build the message and node Session.run gives it.
    handle = tf_internals.make_callable_now(session, options)
    where = [names.index(e.name) if isinstance(e, tf.Tensor) else None for e in elements]
    pack = _packing(fetches, where)
    return lambda: pack(tf_internals.do_call(session, handle))


def _packing(fetches: Any, where: list[int | None]) -> Callable[[list], Any]:
    """What makes `fetches`' structure of the callable's values (`where`: each leaf's value, None for an op's).
    A leaf and a flat dict (a prediction's tensors) are packed directly, without tf.nest's cost per call."""
    if not tf.nest.is_nested(fetches):
        index = where[0]
        return lambda values: None if index is None else values[index]
    if type(fetches) is dict and not any(tf.nest.is_nested(value) for value in fetches.values()):
        by_key = list(zip(sorted(fetches), where))  # tf.nest's order of a dict's leaves: its sorted keys
        order = list(fetches)

        def pack_dict(values):
            found = {key: None if index is None else values[index] for key, index in by_key}
            return {key: found[key] for key in order}

        return pack_dict
    return lambda values: tf.nest.pack_sequence_as(fetches, [None if i is None else values[i] for i in where])

