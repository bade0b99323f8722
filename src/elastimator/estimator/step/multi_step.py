"""Several training steps per session call: `RunConfig(steps_per_execution=N)`.

A session call costs a fixed amount on top of its ops: Python hooks, fetch and
feed handling, and setting up the executor for the graph. With a small model or
a fast device that overhead is a real share of each step. TPUEstimator's
`iterations_per_loop` ran N steps per call for this reason; this is the same
idea for CPU and GPU graphs.

How it is built. The model is built once, exactly as for one step per call.
Then the *step* - every op the train_op and the loss are computed from, back to
the stateful handles they use (variables, the input iterator, lookup tables,
queues), which are shared, not copied - is copied into a graph-mode while loop.
One call runs `k - 1` steps in the loop and then the original step, ordered
after the loop. Hence:

- The model_fn is not called inside a loop, so any model_fn that trains one
  step per call trains N (variables made from tensors, Keras 3 layers and all).
- Hooks see one session call per execution and the values of its *last*
  step: the loss, any tensor a LoggingTensorHook names, the summaries (which
  are therefore computed once per call, not per step).
- The global step advances by `k` per call. The global step read that
  TensorFlow's hooks use is taken right before the last step (the value
  tf.estimator's hooks always got, one step stale), so checkpoint, step-counter
  and stop-at-step hooks act on the right step.
- `ExecutionPlanHook` sizes each call: at most N steps, never past the last
  step, and never past a step at which a hook acts (a checkpoint, a summary, a
  user's StopAtStepHook: `hook_steps`), so those happen on the same steps as
  with one step per call.

Input that ends inside a call stops training as usual (the steps already run
in that call are kept, and the final checkpoint has them).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, graph_pb2

from elastimator.errors import ConfigError
from elastimator.estimator import tf_internals
from elastimator.estimator.step import hook_steps
from elastimator.estimator.step.steps_per_call import Pace
from elastimator.estimator.step.training_step import TrainingStep, as_op

_PLACEHOLDERS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
_V1_CONTROL_FLOW = frozenset({"Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration",
                              "Merge", "RefMerge", "Switch", "RefSwitch", "LoopCond"})
# TensorFlow's CheckpointSaverHook, StepCounterHook, SummarySaverHook and StopAtStepHook read the global
# step through the one tensor in this collection (tf.estimator filled it the same way).
_GLOBAL_STEP_READ_KEY = "global_step_read_op_cache"
_INCREMENTS = frozenset({"AssignAddVariableOp", "AssignAdd"})
_COLOCATION = "_class"


@dataclasses.dataclass(frozen=True)
class Execution:
    """A training graph that runs up to `steps` steps per session call."""

    steps: int
    """The most steps one session call runs (RunConfig.steps_per_execution)."""
    size: tf.Tensor
    """The steps the next call runs, 1..steps; feed it (ExecutionPlanHook does), or the call runs one step."""
    step_read: tf.Tensor
    """The global step right before the call's last step."""
    global_step: tf.Variable


def _is_shared(op: tf.Operation) -> bool:
    """Ops a copied step uses rather than copies: handles to state (variables, iterators, tables) and feeds."""
    return op.type in _PLACEHOLDERS or (not op.inputs and op.op_def.is_stateful)


def step_ops(fetches: Iterable[tf.Operation]) -> list[tf.Operation]:
    """The ops that `fetches` run, dependencies first, stopping at shared state (`_is_shared`)."""
    order: list[tf.Operation] = []
    seen: set[tf.Operation] = set()
    stack = [(op, False) for op in fetches]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen or _is_shared(op):
            continue
        if op.type in _V1_CONTROL_FLOW:
            raise ConfigError(
                f"steps_per_execution > 1 copies the training step into a loop, but the step uses TF1 control flow "
                f"(op {op.name!r} of type {op.type}), which cannot be copied. Keep TF2 control flow enabled (do not "
                "call tf.compat.v1.disable_control_flow_v2()), or set RunConfig(steps_per_execution=1)."
            )
        seen.add(op)
        stack.append((op, True))
        stack.extend((d, False) for d in [*op.control_inputs, *(t.op for t in op.inputs)] if d not in seen)
    return order


def copy_ops(ops: Sequence[tf.Operation]) -> dict[tf.Operation, tf.Operation]:
    """Copies `ops` (in dependency order) into the current graph context; inputs outside `ops` are shared.

    The copies are imported from the ops' own NodeDefs in one `import_graph_def`, each named for its op under a
    scope of its own (`steps_per_execution/step/`). One import costs about half of creating the ops one by one
    (docs/performance.md, "Costs behind the engine's choices"), which the first step waits for.
    Control inputs from outside `ops` are dropped (the loop runs after them already); colocations name ops
    outside the import, so they are set on the copies afterwards rather than prefixed by it.
    """
    graph = tf.compat.v1.get_default_graph()
    names = {op.name for op in ops}
    node_defs = {node.name: node for node in graph.as_graph_def().node if node.name in names}
    step = graph_pb2.GraphDef(versions=graph.graph_def_versions)
    shared: dict[str, tf.Tensor] = {}
    colocations: dict[str, attr_value_pb2.AttrValue] = {}
    for op in ops:
        node = step.node.add()
        node.CopyFrom(node_defs[op.name])
        if _COLOCATION in node.attr:
            colocations[op.name] = node.attr[_COLOCATION]
            del node.attr[_COLOCATION]
        inputs = []
        for name in node.input:
            if name.startswith("^"):
                if name[1:] in names:
                    inputs.append(name)
                continue
            if name.split(":")[0] not in names:
                shared[name] = graph.get_tensor_by_name(name if ":" in name else f"{name}:0")
            inputs.append(name)
        node.ClearField("input")
        node.input.extend(inputs)
    copied = tf.graph_util.import_graph_def(step, input_map=shared, return_elements=[op.name for op in ops],
                                            name="step")
    copies = dict(zip(ops, copied))
    for name, colocation in colocations.items():
        tf_internals.set_attr(copies[graph.get_operation_by_name(name)], _COLOCATION, colocation)
    return copies


def v1_while_loop(cond, body, loop_vars, name: str = "steps_per_execution"):
    """A TF1 while loop: a frame inside this graph, so the copied ops share its variables and handles directly
    (a TF2 loop would be a function graph that captures each of them). Built as TF1's `while_loop` builds it, but
    without switching TF2 control flow off: that switch is one flag for the whole process, and another thread
    building a graph meanwhile would get TF1 control flow too. (The body makes no control flow of its own.)"""
    with tf.name_scope(name):
        context = tf_internals.control_flow_ops.WhileContext(parallel_iterations=1, back_prop=False)
        if context.outer_context is None:
            tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.WHILE_CONTEXT, context)
        return context.BuildLoop(cond, body, loop_vars, None, False)


def order_step_read(global_step: tf.Variable) -> tf.Tensor:
    """One step per call: the global step read that TensorFlow's hooks fetch with each step, ordered before the
    step's increment, so that it always reads the step about to run.

    Unordered, the read may run after the optimizer's `assign_add` - on a loaded machine often - and
    SummarySaverHook and StepCounterHook then plan one step early (summaries at steps 20, 30 instead of 21, 31).
    Only increments are ordered after it; the variable's initializer and restores are not touched.
    """
    graph = tf.compat.v1.get_default_graph()
    read = tf.identity(global_step.read_value(), name="global_step/step_read")
    for op in graph.get_operations():
        if op.type in _INCREMENTS and op.inputs and op.inputs[0].op is global_step.op:
            tf_internals.add_control_input(op, read.op)
    graph.get_collection_ref(_GLOBAL_STEP_READ_KEY)[:] = [read]
    return read


def after_call(step_read: tf.Tensor) -> tf.Tensor:
    """The global step once a call's steps have run, from its ordered read (taken right before the last step)."""
    return tf.add(step_read, 1, name="step_after_call")


def step_after_call() -> tf.Tensor:
    """For a hook to fetch with the train op: the global step once the call's steps have run (its ordered read,
    plus one). Fetching the global step variable instead reads it before or after the increment, as it happens;
    in a graph elastimator did not build for training, that variable is all there is.
    """
    reads = tf.compat.v1.get_collection(_GLOBAL_STEP_READ_KEY)
    if len(reads) == 1:
        return after_call(reads[0])
    return tf.compat.v1.train.get_global_step()


def check_copyable(train_op, loss: tf.Tensor, outputs: Mapping[str, tf.Tensor]) -> list[tf.Operation]:
    """The ops of the step that `train_op`, `loss` and `outputs` run, in dependency order; ConfigError when the
    step cannot run several times per call (TF1 control flow, a step output without a static shape)."""
    for name, value in outputs.items():
        if not value.shape.is_fully_defined():
            raise ConfigError(f"steps_per_execution > 1 stacks each step output, so it needs a static shape; "
                              f"step output {name!r} has shape {value.shape}. Set its shape (tf.ensure_shape), or "
                              "use steps_per_execution=1.")
    return step_ops([as_op(train_op), loss.op] + [value.op for value in outputs.values()])


def build(*, train_op, loss: tf.Tensor, global_step: tf.Variable, steps: int,
          outputs: Mapping[str, tf.Tensor] | None = None) -> tuple[Execution, TrainingStep]:
    """Makes the current graph run up to `steps` training steps per call of `train_op` (see the module doc).

    Args:
        train_op: the step's train op (an Operation or Tensor).
        loss: the step's loss; its value is the last step's.
        global_step: the global step variable.
        steps: the most steps per call (> 1).
        outputs: per-step tensors (with static shapes) that hooks need for every step of a call; what they
            mean is the input's business.

    Returns:
        The Execution, and the TrainingStep with every output stacked over the call's steps.
    """
    outputs = dict(outputs or {})
    ops = check_copyable(train_op, loss, outputs)
    train = as_op(train_op)
    # One step unless fed: the hooks' own reads of the global step (which wait for the loop) then run no loop.
    size = tf.compat.v1.placeholder_with_default(tf.constant(1, tf.int32), [], name="steps_per_execution/size")
    finished = {name: tf.compat.v1.Variable(
        tf.zeros([0, *value.shape], value.dtype), shape=tf.TensorShape([None, *value.shape]), trainable=False,
        collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES], name=f"steps_per_execution/finished/{name}")
        for name, value in outputs.items()}

    def body(i):
        copies = copy_ops(ops)
        done = [copies[train]]
        for name, value in outputs.items():  # each step's row, kept once the step has run
            row = tf.expand_dims(copies[value.op].outputs[value.value_index], 0)
            with tf.control_dependencies([copies[train]]):
                done.append(finished[name].assign(tf.concat([finished[name].read_value(), row], 0)))
        with tf.control_dependencies(done):
            return i + 1

    def more_steps(i):
        with tf.name_scope("more_steps"):
            return i < size - 1

    looped = v1_while_loop(more_steps, body, [tf.constant(0)])
    with tf.control_dependencies([looped]):
        step_read = tf.identity(global_step.read_value(), name="steps_per_execution/step_read")
    # The original step runs last: every op of it that depends on nothing else in it waits for the loop.
    # (Operation has no public way to add a control input to an op already built.)
    inside = set(ops)
    for op in ops:
        if not any(t.op in inside for t in op.inputs) and not any(c in inside for c in op.control_inputs):
            tf_internals.add_control_input(op, step_read.op)
    tf.compat.v1.get_default_graph().get_collection_ref(_GLOBAL_STEP_READ_KEY)[:] = [step_read]
    execution = Execution(steps=steps, size=size, step_read=step_read, global_step=global_step)
    stacked = {}
    for name, value in outputs.items():
        with tf.control_dependencies([looped]):
            rows = tf.concat([finished[name].read_value(), tf.expand_dims(value, 0)], 0)
        # Emptied once read, in the same call: after a call that fails part way it holds just that call's steps.
        with tf.control_dependencies([rows]):
            emptied = finished[name].assign(tf.zeros([0, *value.shape], value.dtype))
        with tf.control_dependencies([emptied]):
            stacked[name] = tf.identity(rows, name=f"steps_per_execution/outputs/{name}")
    step = TrainingStep(loss=loss, global_step=after_call(step_read), outputs=stacked,
                        finished_outputs={name: variable.value() for name, variable in finished.items()},
                        train_op=train)
    return execution, step


class ExecutionPlanHook(tf.compat.v1.train.SessionRunHook):
    """Sizes each session call of an Execution, and stops training at the last step.

    A call runs at most `execution.steps` steps (fewer when a `Pace` sizes it),
    never past `last_step`, and never past a step at which one of the watched
    hooks acts (`hook_steps`: the checkpoint saver, summary saver, step counter,
    a user's StopAtStepHook, ...), so that each acts on the same step as with one
    step per call. It replaces StopAtStepHook for a multi-step execution; list it
    first, and `watch` the training's other hooks once they are all made.
    """

    def __init__(self, execution: Execution, *, num_steps: int | None = None, last_step: int | None = None,
                 pace: Pace | None = None):
        self.execution = execution
        self._pace = pace
        self._num_steps, self._last_step = num_steps, last_step
        self._watched: tuple = ()
        self.step = 0
        """The global step after the last call (as this process saw it)."""
        self.planned_end = 0
        """The global step the next call should end on."""

    def watch(self, hooks: Sequence) -> None:
        """The hooks whose actions calls must not run past (the training's hooks; this one is left out)."""
        self._watched = tuple(hook for hook in hooks if hook is not self)

    def after_create_session(self, session, coord):
        self.step = int(session.run(self.execution.global_step))
        if self._num_steps is not None and self._last_step is None:
            self._last_step = self.step + self._num_steps
        if self._last_step is not None and self.step >= self._last_step:
            coord.request_stop()

    def before_run(self, run_context):
        size = self.execution.steps if self._pace is None else min(self.execution.steps, self._pace.next_size())
        if self._last_step is not None:
            size = min(size, self._last_step - self.step)
        size = hook_steps.limit(size, self.step, self._watched)
        self.planned_end = self.step + size
        if self._pace is not None:
            self._pace.started()
        return tf.compat.v1.train.SessionRunArgs(self.execution.step_read, feed_dict={self.execution.size: size})

    def after_run(self, run_context, run_values):
        if self._pace is not None:
            self._pace.finished(self.planned_end - self.step)
        self.step = int(run_values.results) + 1
        if self._last_step is not None and self.step >= self._last_step:
            run_context.request_stop()
