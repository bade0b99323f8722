"""What running part of a graph may do, beyond computing its outputs: draw random numbers, write a model
variable, add state.

A kept graph serves later calls only where they would behave as fresh graphs do (`loops/call_plan`); these are
the facts about a graph those rules weigh, read from its ops and the functions they call.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import tensorflow as tf

from elastimator.estimator import tf_internals

STATE_COLLECTIONS = (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                     tf.compat.v1.GraphKeys.TABLE_INITIALIZERS, tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS,
                     tf.compat.v1.GraphKeys.RESOURCES)
"""The collections whose growth means a graph's session, made before, lacks what they add."""

_RANDOM = ("TruncatedNormal", "Multinomial", "ParameterizedTruncatedNormal")
_WRITES = ("Assign", "ResourceApply", "ResourceSparseApply", "ResourceScatter", "ResourceStridedSliceAssign",
           "ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMin", "ScatterMax")


def state_of(graph: tf.Graph) -> tuple:
    """How many variables, tables and saveables `graph` holds (`STATE_COLLECTIONS`)."""
    return tuple(len(graph.get_collection(key)) for key in STATE_COLLECTIONS)


def is_stateful_random(op_type: str) -> bool:
    """Whether an op of `op_type` draws from a random state of its own (a fresh graph's draws repeat under a
    graph seed; a kept graph's go on)."""
    op_def = tf_internals.op_def_registry.get(op_type)
    if op_def is None or not op_def.is_stateful:
        return False
    return "Random" in op_type or op_type.startswith("Stateful") or op_type in _RANDOM


def random_input(ops: Iterable[tf.Operation]) -> bool:
    """Whether an input pipeline's ops shuffle or sample: their seeds, drawn from the graph's op count under a
    graph seed, would differ in a kept graph from a fresh one's."""
    return any("Shuffle" in op.type or "Random" in op.type or is_stateful_random(op.type) for op in ops)


@dataclasses.dataclass(frozen=True)
class Reach:
    """What running some fetches may do."""

    draws_random_numbers: bool
    """A stateful random op runs (in the graph or in a function it calls)."""
    writes_model: bool
    """An op may change a global variable: a write to one, or a function call given one."""


def reach(fetches) -> Reach:
    """What running `fetches` (of one graph) may do, from every op it runs and every function those call."""
    stack = [t if isinstance(t, tf.Operation) else t.op for t in tf.nest.flatten(fetches)]
    if not stack:
        return Reach(draws_random_numbers=False, writes_model=False)
    graph = stack[0].graph
    model = {v.op for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)}
    random = writes = False
    seen: set = set()
    functions: list[str] = []
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        random = random or is_stateful_random(op.type)
        called = _called(op.node_def)
        functions.extend(called)
        if any(t.op in model for t in op.inputs) and (called or op.type.startswith(_WRITES)):
            writes = True
        stack.extend([*op.control_inputs, *(t.op for t in op.inputs)])
    library = {f.signature.name: f for f in graph.as_graph_def().library.function} if functions else {}
    done: set = set()
    while functions and not random:
        name = functions.pop()
        if name in done or name not in library:
            continue
        done.add(name)
        for node in library[name].node_def:
            random = random or is_stateful_random(node.op)
            functions.extend(_called(node))
    return Reach(draws_random_numbers=random, writes_model=writes)


def _called(node_def) -> list[str]:
    """The functions a node calls (its function-valued attributes: an If's branches, a call's function)."""
    names = []
    for value in node_def.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        names.extend(f.name for f in value.list.func)
    return names
