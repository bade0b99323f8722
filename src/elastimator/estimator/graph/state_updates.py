"""Finding variable updates in a graph that nothing would ever run.

Keras 3 layers and metrics work inside a graph-mode `model_fn`, but their state
updates (BatchNormalization moving statistics, `Metric.update_state`) are
plain assign ops that no fetch depends on: a session never runs them, and the
model trains or evaluates silently wrong. This module finds such "dangling"
updates so the engine can attach them where they belong.
"""

from __future__ import annotations

from typing import Iterable

import tensorflow as tf

from elastimator.estimator import tf_internals

_ASSIGN_TYPES = frozenset({
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "Assign", "AssignAdd", "AssignSub",
})
_HANDLE_TYPES = frozenset({"VarHandleOp", "VariableV2", "Variable"})
STATE_MAKERS = _HANDLE_TYPES | frozenset({
    "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2", "AnonymousHashTable",
    "AnonymousMutableHashTable", "AnonymousMutableHashTableOfTensors", "AnonymousMutableDenseHashTable",
})
"""Ops that make a variable or a table: state a session initializes (or restores) before anything reads it."""


def reads_state(op: tf.Operation) -> bool:
    """Whether running `op` reads a variable or table: one of the ops it runs makes one (`STATE_MAKERS`). For an
    input pipeline's start (its iterator's initializer): a table or variable its input_fn made."""
    return makes_state(ancestors([op]))


def makes_state(ops: Iterable[tf.Operation]) -> bool:
    """Whether any of `ops` makes a variable or table (`STATE_MAKERS`)."""
    return any(op.type in STATE_MAKERS for op in ops)


def ancestors(roots: Iterable[tf.Operation | tf.Tensor]) -> set[tf.Operation]:
    """Every op that `roots` depend on, through data and control edges."""
    stack = [r.op if isinstance(r, tf.Tensor) else r for r in roots if r is not None]
    seen: set[tf.Operation] = set()
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def target_variable_op(assign: tf.Operation) -> tf.Operation | None:
    """The variable-creating op an assign writes to (through Identity ops)."""
    op = assign.inputs[0].op
    while op.type == "Identity" and op.inputs:
        op = op.inputs[0].op
    return op if op.type in _HANDLE_TYPES else None


def dangling_updates(
    graph: tf.Graph,
    created_after: int,
    reachable: set[tf.Operation],
    variable_ops: set[tf.Operation] | None = None,
) -> list[tf.Operation]:
    """Assign ops created after op id `created_after` that running `reachable` would not run.

    Args:
        graph: The graph to search.
        created_after: Only ops with a larger `_id` (created later) are considered.
        reachable: Ops that will run anyway (ancestors of the fetches).
        variable_ops: If given, only updates of these variables count.

    Returns:
        The unreachable assign ops, in creation order.
    """
    found = []
    for op in graph.get_operations():
        if tf_internals.op_id(op) <= created_after or op.type not in _ASSIGN_TYPES:
            continue
        if op in reachable:
            continue
        target = target_variable_op(op)
        if target is None or (variable_ops is not None and target not in variable_ops):
            continue
        # Initializers are assigns too, but they are run by the session's init op.
        if op.name == f"{target.name}/Assign":
            continue
        found.append(op)
    return found


def last_op_id(graph: tf.Graph) -> int:
    """The id of the newest op, to mark "everything created from here on"."""
    return graph.version
