"""Keras 3 layers inside a graph-mode `model_fn`: the traps, handled.

Keras 3 layers build fine in a `tf.Graph`, but:

0. Keras 3 numbers auto-named layers ("dense", "dense_1", ...) process-wide,
   while every Estimator call builds a new graph: the eval graph's "dense_2"
   would not find the checkpoint's "dense". Each model_fn call gets fresh
   numbering, as `tf.compat.v1.layers` (numbered per graph) always had.

1. `Dropout(...)(x, training=<bool tensor>)` raises deep inside Keras. We
   re-raise with the fix: `mode` is a Python string, so
   `training=(mode == ModeKeys.TRAIN)` is a Python bool and works.
2. `BatchNormalization` creates its moving-statistics assigns, but nothing runs
   them (Keras 3 has no UPDATE_OPS). We attach such dangling updates of a
   layer's state to the train_op, the way `tf.compat.v1.layers` users attached
   UPDATE_OPS by hand, and never an optimizer's: tf.estimator 2.15 ran the
   returned train_op only, so an optimizer the model_fn built and dropped stays
   unrun here too (`attach_dangling_updates` gives the rule).
3. Weight regularizers are not added to the REGULARIZATION_LOSSES collection,
   so `tf.compat.v1.losses.get_regularization_loss()` silently returns 0. The
   engine cannot change a train_op already built from the loss, so when a
   regularized Keras 3 weight's penalty is missing from the loss it stops with
   a message naming the weights and the fix (`loss += tf.add_n(model.losses)`).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sys
from typing import Callable, Iterator

import tensorflow as tf

from elastimator.errors import ModelFnError
from elastimator.estimator import tf_internals
from elastimator.estimator.contract.spec import EstimatorSpec
from elastimator.estimator.graph import state_updates
from elastimator.estimator.step.write_gate import writes_state

logger = logging.getLogger("elastimator")

# Ops a built-in Keras regularizer (L1, L2, L1L2) applies to the weight first.
_PENALTY_OP_TYPES = frozenset({"Square", "Abs", "L2Loss"})
_PASS_THROUGH = frozenset({"ReadVariableOp", "Identity", "Cast"})


@contextlib.contextmanager
def explain_model_fn_errors(model_fn: Callable) -> Iterator[None]:
    """Turns Keras-in-graph failures raised by `model_fn` into actionable errors."""
    name = getattr(model_fn, "__qualname__", repr(model_fn))
    try:
        yield
    except tf.errors.OperatorNotAllowedInGraphError as e:
        raise ModelFnError(
            f"model_fn {name} used a symbolic tensor as a Python bool (e.g. `if tensor:`). With Keras 3 "
            "layers this most often means `training=` got a tensor (e.g. Dropout(...)(x, training=tf.equal(...))). In a model_fn, "
            "`mode` is a Python string, so pass training=(mode == ModeKeys.TRAIN). Original error: "
            f"{str(e).splitlines()[0]}"
        ) from e
    except AttributeError as e:
        if "not available with Keras 3" not in str(e):
            raise
        raise ModelFnError(
            f"model_fn {name} uses a TF1 Keras API (tf.compat.v1.layers or tf.compat.v1.keras) that TensorFlow "
            "routes to Keras 3, which lacks it. Import elastimator before anything touches tf.keras (it "
            "selects tf-keras for these APIs), or set TF_USE_LEGACY_KERAS=1 before importing TensorFlow. "
            f"Original error: {e}"
        ) from e


@contextlib.contextmanager
def fresh_keras_names() -> Iterator[None]:
    """Numbers Keras 3 auto-named layers from zero for the duration of one model_fn call.

    A Keras 3 that is not loaded yet has no names to reset (and importing it here would cost every
    model about 90 MB); tf-keras numbers names per graph already.
    """
    if "keras" not in sys.modules:
        yield
        return
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # a Keras without that module: nothing to reset
        yield
        return
    key = "object_name_uids"
    saved = global_state.get_global_attribute(key)
    global_state.set_global_attribute(key, None)
    try:
        yield
    finally:
        global_state.set_global_attribute(key, saved)


def attach_dangling_updates(
    spec: EstimatorSpec, graph: tf.Graph, model_fn_start: int, input_ops: set[tf.Operation]
) -> EstimatorSpec:
    """Adds the never-run updates of layers' state (Keras 3 BatchNormalization's moving statistics) to the train_op.

    An assign is attached only if all of these hold:

    * model_fn made it, and neither the train_op nor the loss runs it;
    * it writes a non-trainable variable other than the global step;
    * it is computed from the input batch, by the forward pass: a layer's statistic is. An optimizer's slot
      update is computed from a gradient (an op that `tf.gradients` made: it marks each with the op it
      differentiates), a reset or a counter from no batch at all;
    * running it writes nothing else that the train_op does not write already. Every tf.compat.v1 and
      tf-keras optimizer updates its beta powers, its iterations or the global step after its variables:
      attaching one of those would run a dropped optimizer whole, which an Estimator given another
      train_op never did (Neural Structured Learning's regularizers return their own train_op in place
      of the base model's).
    """
    will_run = state_updates.ancestors([spec.train_op, spec.loss])
    trainable = {v.op for v in graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)}
    every_var = {v.op for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)}
    global_step = {v.op for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_STEP)}
    updates = []
    for op in state_updates.dangling_updates(graph, model_fn_start, will_run, every_var - trainable - global_step):
        runs = state_updates.ancestors([op])
        if (runs & input_ops and not any(_from_gradient(o) for o in runs)
                and not any(writes_state(o) for o in runs - will_run - {op})):
            updates.append(op)
    if not updates:
        return spec
    logger.info(
        "Running %d state update(s) that nothing else runs (e.g. Keras 3 BatchNormalization moving "
        "statistics) with each train step: %s", len(updates), ", ".join(op.name for op in updates[:8]),
    )
    with graph.as_default():
        train_op = tf.group(spec.train_op, *updates, name="train_op_with_state_updates")
    return spec._replace(train_op=train_op)


def _from_gradient(op: tf.Operation) -> bool:
    """Whether `tf.gradients` made `op` (it records the forward op each gradient op differentiates)."""
    return tf_internals.made_by_gradients(op)


def _keras3_regularized(graph: tf.Graph) -> list:
    """Keras 3 variables of `graph` that carry a weight regularizer."""
    keras = sys.modules.get("keras")
    if keras is None or not getattr(keras, "__version__", "").startswith("3."):
        return []
    tf_vars = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    if not tf_vars:
        return []
    owners = gc.get_referrers(*tf_vars)
    return [
        o for o in owners
        if isinstance(o, keras.Variable) and getattr(o, "regularizer", None) is not None
        and tf_internals.keras_variable_value(o) is not None and tf_internals.keras_variable_value(o).graph is graph
    ]


def _builtin_regularizer(regularizer) -> bool:
    module = type(regularizer).__module__
    return module.startswith("keras.") and type(regularizer).__name__ in ("L1", "L2", "L1L2")


def _penalized(variable_op: tf.Operation, loss_ancestors: set[tf.Operation]) -> bool:
    """Whether some penalty op (square/abs of the weight) feeds the loss."""
    frontier = [variable_op]
    seen = set()
    while frontier:
        op = frontier.pop()
        for out in op.outputs:
            for consumer in out.consumers():
                if consumer in seen or consumer not in loss_ancestors:
                    continue
                seen.add(consumer)
                if consumer.type in _PENALTY_OP_TYPES:
                    return True
                if consumer.type in _PASS_THROUGH:
                    frontier.append(consumer)
    return False


def check_regularization(spec: EstimatorSpec, graph: tf.Graph) -> None:
    """Raises if a Keras 3 weight's regularization penalty is missing from the loss."""
    regularized = [v for v in _keras3_regularized(graph) if _builtin_regularizer(v.regularizer)]
    if not regularized:
        return
    loss_ancestors = state_updates.ancestors([spec.loss])
    missing = [v for v in regularized if not _penalized(tf_internals.keras_variable_value(v).op, loss_ancestors)]
    if missing:
        names = ", ".join(v.path for v in missing[:8])
        raise ModelFnError(
            f"Keras 3 weights with regularizers ({names}) have no penalty in the TRAIN loss. Keras 3 does "
            "not add regularization to tf.compat.v1's REGULARIZATION_LOSSES collection, so "
            "tf.compat.v1.losses.get_regularization_loss() does not include it. Add the layers' own "
            "losses instead: loss = data_loss + tf.add_n(model.losses) (or layer.losses)."
        )
