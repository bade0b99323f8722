"""Holding a training call's writes to the model until the host says they may go.

An input that must settle something about the previous batch before the model
changes again gates the call: its check runs in the call, alongside the step's
forward and backward pass, and every op that writes state waits for it. The
elastic feed uses this to let batch N's report travel while step N+1
computes, and still have report N acknowledged before step N+1 writes anything,
so a process that dies has at most one trained batch unreported.

A check that returns False withdraws the call's batch: the call fails before
any write (`training_step.is_withdrawn` tells the training loop, which goes on
with the next batch).

A gate may instead have a fast check, built of graph ops, that decides alone:
no Python runs in the call (a `numpy_function` costs some 40-130 µs of one),
for a caller that has settled on the host beforehand what the check would wait
for. The elastic feed's gate, for a trainer with a report ring, is such a
check of the batch's lease (elastic/report_ring.py).

What counts as a write: any op of the call that takes a variable, table or other
resource (or a TF1 reference variable) and is not one of the known reads or
pass-throughs below. Unknown ops are taken as writes, so a new kind of update is
held too; the cost of a read taken for a write is only that it waits for the check.
An op inside a TF1 while loop cannot wait for an op outside it; the loop's entry
(its Enter ops) waits instead.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from elastimator.estimator import state_updates, training_step

_READS_AND_PASS_THROUGHS = frozenset({
    "ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VarIsInitializedOp", "VariableShape",
    "IsVariableInitialized", "Gather", "GatherV2", "GatherNd",  # a TF1 variable's sparse_read gathers from the ref
    "LookupTableFindV2", "LookupTableSizeV2", "LookupTableExportV2",
    "Identity", "IdentityN", "Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch", "Merge", "RefMerge",
    "NextIteration", "RefNextIteration",
})
_STEP_SCRATCH_PREFIXES = ("Iterator", "TensorArray", "Stack")
"""Resources that are the step's own machinery, not the model: its input iterator, a loop's tensor arrays."""


def writes_state(op: tf.Operation) -> bool:
    """Whether `op` may change a variable, a table or other state it takes as input."""
    if op.type in _READS_AND_PASS_THROUGHS or op.type.startswith(_STEP_SCRATCH_PREFIXES):
        return False
    return any(t.dtype == tf.resource or t.dtype != t.dtype.base_dtype for t in op.inputs)


def _outermost_while(op: tf.Operation):
    """The outermost TF1 while loop `op` is in, or None."""
    found = None
    context = op._get_control_flow_context()  # pylint: disable=protected-access
    while context is not None:
        if context.IsWhileContext():
            found = context
        context = context.outer_context
    return found


def _waiting_ops(writes: Sequence[tf.Operation]) -> list[tf.Operation]:
    """The ops that must wait for the gate: each write, or the entry of the TF1 while loop it is in."""
    waiting: dict[tf.Operation, None] = {}  # ordered, without repeats
    loops: set[str] = set()
    for op in writes:
        loop = _outermost_while(op)
        if loop is None:
            waiting[op] = None
        elif loop.name not in loops:
            loops.add(loop.name)
            waiting.update(dict.fromkeys(e for e in op.graph.get_operations()
                                         if e.type in ("Enter", "RefEnter") and e.get_attr("frame_name") == loop.name))
    return list(waiting)


@dataclasses.dataclass(frozen=True)
class Gate:
    """A gate on a train op's writes."""

    op: tf.Operation
    """The gate op; it has no effect on a call that does not run the train op."""
    given: tuple[bool, ...]
    """Per tensor asked for, whether the check gets its value (False: it gets None)."""
    holds_writes: bool
    """Whether the train op writes anything, i.e. whether every call of it runs the check."""
    fast: bool = False
    """Whether the graph check decides alone: no Python runs in the call (`gate_writes(fast=...)`)."""


def gate_writes(train_op, check: Callable[..., bool], tensors: Sequence[tf.Tensor],
                name: str = "write_gate", fast: Callable[..., tf.Tensor] | None = None) -> Gate:
    """Makes every call of `train_op` run `check` and hold its writes until `check` returns.

    Args:
        train_op: the op a training call runs (an Operation or Tensor).
        check: called in the call with the values of `tensors` (None for one that cannot be waited for);
            returns True to let the writes go, False to withdraw the batch; what it raises fails the call.
        tensors: values `check` needs. One computed from the call's own writes would wait for itself; it is
            passed as None.
        name: the gate op's name.
        fast: builds, from `tensors`, a boolean graph check that decides in place of `check` (False withdraws
            the batch; no Python in the call): the caller has settled on the host what `check` would wait for.
            Used only where every tensor can be waited for; elsewhere `check` runs.

    Returns:
        The gate, and what its check gets.
    """
    writes = [op for op in state_updates.ancestors([training_step.as_op(train_op)]) if writes_state(op)]
    waiting = _waiting_ops(writes)
    held = set(writes) | set(waiting)

    def waits_for_itself(t: tf.Tensor) -> bool:
        return bool(state_updates.ancestors([t]) & held)

    usable = [not waits_for_itself(t) for t in tensors]
    inputs = [t for t, ok in zip(tensors, usable) if ok]

    def run(*values):
        given = iter(values)
        return np.bool_(check(*[next(given) if ok else None for ok in usable]))

    use_fast = fast is not None and all(usable) and bool(waiting)
    if use_fast:
        passed = tf.identity(fast(*inputs), name=name)
    else:
        passed = tf.numpy_function(run, inputs, tf.bool, stateful=True, name=name)
        passed.set_shape([])
    gate = training_step.withdraw_unless(passed)
    for op in waiting:
        op._add_control_input(gate)  # pylint: disable=protected-access  (no public way on a built op)
    return Gate(gate, tuple(usable), bool(waiting), use_fast)
