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
no Python runs in the call (a `numpy_function` costs tens of µs of one),
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

from elastimator.estimator import tf_internals
from elastimator.estimator.graph import state_updates
from elastimator.estimator.step import training_step

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
    context = tf_internals.control_flow_context(op)
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


@dataclasses.dataclass(frozen=True)
class GatePlan:
    """Which ops a gate on a train op's writes would hold, and which of the tensors asked for its check can get:
    what a caller needs to choose its kind of check before building it (`plan_gate`)."""

    waiting: tuple[tf.Operation, ...]
    """The ops that wait for the gate: each write, or the entry of the TF1 while loop it is in."""
    tensors: tuple[tf.Tensor, ...]
    given: tuple[bool, ...]
    """Per tensor, whether the check can get its value: one computed from the call's own writes would wait for
    itself, and the check gets None for it."""

    @property
    def holds_writes(self) -> bool:
        """Whether the train op writes anything, i.e. whether a gate would run in every call of it."""
        return bool(self.waiting)

    @property
    def decides_in_graph(self) -> bool:
        """Whether a graph check can decide alone: it holds writes and gets every tensor."""
        return self.holds_writes and all(self.given)

    def in_python(self, check: Callable[..., bool], name: str = "write_gate") -> Gate:
        """The gate with `check` called in the call, given the values of the tensors it can get (None for the
        rest); True lets the writes go, False withdraws the batch; what it raises fails the call."""
        given = self.given

        def run(*values):
            values = iter(values)
            return np.bool_(check(*[next(values) if ok else None for ok in given]))

        passed = tf.numpy_function(run, self._inputs(), tf.bool, stateful=True, name=name)
        passed.set_shape([])
        return self._hold(passed, fast=False)

    def in_graph(self, build: Callable[..., tf.Tensor], name: str = "write_gate") -> Gate:
        """The gate with a boolean graph check `build(*tensors)` that decides alone (False withdraws the batch):
        no Python in the call. Only where `decides_in_graph`."""
        if not self.decides_in_graph:
            raise ValueError("A graph check needs writes to hold and every tensor it checks; "
                             f"this gate holds {len(self.waiting)} op(s) and gets {self.given}. "
                             "Use in_python, which gets None for what it cannot wait for.")
        return self._hold(tf.identity(build(*self.tensors), name=name), fast=True)

    def _inputs(self) -> list[tf.Tensor]:
        return [t for t, ok in zip(self.tensors, self.given) if ok]

    def _hold(self, passed: tf.Tensor, fast: bool) -> Gate:
        gate = training_step.withdraw_unless(passed)
        for op in self.waiting:
            tf_internals.add_control_input(op, gate)
        return Gate(gate, self.given, self.holds_writes, fast)


def plan_gate(train_op, tensors: Sequence[tf.Tensor]) -> GatePlan:
    """What a gate on every call of `train_op` would hold, with a check of `tensors` (see GatePlan)."""
    writes = [op for op in state_updates.ancestors([training_step.as_op(train_op)]) if writes_state(op)]
    waiting = _waiting_ops(writes)
    held = set(writes) | set(waiting)
    given = tuple(not (state_updates.ancestors([t]) & held) for t in tensors)
    return GatePlan(tuple(waiting), tuple(tensors), given)


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
    plan = plan_gate(train_op, tensors)
    if fast is not None and plan.decides_in_graph:
        return plan.in_graph(fast, name)
    return plan.in_python(check, name)
