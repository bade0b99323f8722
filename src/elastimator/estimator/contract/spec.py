"""`EstimatorSpec`: what a `model_fn` returns, checked for its mode."""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from elastimator._records import record_type
from elastimator.errors import ModelFnError
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import state_updates
from elastimator.estimator.loops.hooks import check_hooks
from elastimator.export.outputs import ExportOutput, PredictOutput

DEFAULT_SERVING_KEY = tf.compat.v1.saved_model.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
_TENSOR_TYPES = (tf.Tensor, tf.SparseTensor, tf.RaggedTensor)


_FIELDS = ("mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs", "training_chief_hooks",
           "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks")


class EstimatorSpec(record_type("EstimatorSpec", _FIELDS)):
    """The ops and objects a `model_fn` returns, validated for its mode.

    * TRAIN needs `loss` and `train_op`.
    * EVAL needs `loss`; `eval_metric_ops` adds metrics.
    * PREDICT needs `predictions`; `export_outputs` names the serving signatures
      (a `PredictOutput` of the predictions under "serving_default" when omitted).

    Every tensor must belong to the graph the Estimator is building. Like
    tf.estimator's, it is a namedtuple: `_replace` validates the new fields, and
    the mode cannot change.

    Example:
        >>> def model_fn(features, labels, mode):
        ...     logits = tf.compat.v1.layers.dense(features["x"], 1)
        ...     if mode == ModeKeys.PREDICT:
        ...         return EstimatorSpec(mode, predictions={"logits": logits})
        ...     loss = tf.compat.v1.losses.mean_squared_error(labels, logits)
        ...     train_op = tf.compat.v1.train.AdamOptimizer().minimize(
        ...         loss, tf.compat.v1.train.get_global_step())
        ...     return EstimatorSpec(mode, loss=loss, train_op=train_op)
    """

    __slots__ = ()

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=None, training_hooks=None, scaffold=None, evaluation_hooks=None,
                prediction_hooks=None):
        if mode not in ModeKeys.ALL:
            raise ModelFnError(f"EstimatorSpec: mode must be one of {list(ModeKeys.ALL)}; got {mode!r}.")
        graph = tf.compat.v1.get_default_graph()
        predictions = _check_predictions(predictions, mode, graph)
        hooks = {name: tuple(check_hooks(f"EstimatorSpec: {name}", value, ModelFnError)) for name, value in (
            ("training_chief_hooks", training_chief_hooks), ("training_hooks", training_hooks),
            ("evaluation_hooks", evaluation_hooks), ("prediction_hooks", prediction_hooks))}
        if scaffold is not None and not isinstance(scaffold, tf.compat.v1.train.Scaffold):
            raise ModelFnError(
                f"EstimatorSpec: scaffold must be a tf.compat.v1.train.Scaffold; got {type(scaffold).__name__}."
            )
        return super().__new__(
            cls, mode=mode, predictions=predictions, loss=_check_loss(loss, mode, graph),
            train_op=_check_train_op(train_op, mode, graph), eval_metric_ops=_check_metrics(eval_metric_ops, graph),
            export_outputs=_check_export_outputs(export_outputs, mode, predictions), scaffold=scaffold, **hooks)

    def _replace(self, **changes) -> "EstimatorSpec":
        """A copy with `changes` applied and validated; the mode stays."""
        if "mode" in changes and changes["mode"] != self.mode:
            raise ModelFnError(f"EstimatorSpec._replace: the mode cannot change (from {self.mode!r} to "
                               f"{changes['mode']!r}); build a new EstimatorSpec instead.")
        return super()._replace(**changes)


def _check_in_graph(name: str, tensor, graph: tf.Graph) -> None:
    if getattr(tensor, "graph", graph) is not graph:
        raise ModelFnError(
            f"EstimatorSpec: {name} must be built in the graph the Estimator passed to model_fn, but it "
            f"belongs to another graph ({tensor!r}). Create every tensor inside model_fn, not at module level."
        )


def _check_predictions(predictions, mode: str, graph: tf.Graph):
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ModelFnError(
                "EstimatorSpec: predictions are required in PREDICT mode; got None. "
                "Return EstimatorSpec(mode, predictions={'name': tensor})."
            )
        return None
    if not isinstance(predictions, Mapping):
        return _as_tensor("predictions", predictions, graph)
    return {key: _as_tensor(f"predictions[{key!r}]", value, graph) for key, value in predictions.items()}


def _as_tensor(name: str, value, graph: tf.Graph):
    """`value` as a tensor of `graph`: tensors as they are, anything tensor-like (a variable, a numpy array)
    converted, as tf.estimator 2.15 converted it."""
    if not isinstance(value, _TENSOR_TYPES):
        try:
            value = tf.compat.v1.convert_to_tensor_or_sparse_tensor(value)
        except (TypeError, ValueError) as error:
            raise ModelFnError(
                f"EstimatorSpec: {name} must be a tensor or convertible to one (a variable, an array); got "
                f"{type(value).__name__}: {error}"
            ) from None
    _check_in_graph(name, value, graph)
    return value


def _check_loss(loss, mode: str, graph: tf.Graph):
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ModelFnError(
                f"EstimatorSpec: loss is required in {mode.upper()} mode; got None. "
                "Return EstimatorSpec(mode, loss=<scalar tensor>, ...)."
            )
        return None
    loss = _as_tensor("loss", loss, graph)
    if not isinstance(loss, tf.Tensor) or not (loss.dtype.is_floating or loss.dtype.is_integer):
        raise ModelFnError(f"EstimatorSpec: loss must be a numeric scalar tensor; got {loss!r}.")
    if loss.shape.rank is not None and loss.shape.num_elements() not in (None, 1):
        raise ModelFnError(
            f"EstimatorSpec: loss must be a scalar (or shape [1]); got shape {loss.shape}. "
            "Reduce it, e.g. tf.reduce_mean(per_example_loss)."
        )
    if loss.shape.rank not in (None, 0):
        loss = tf.reshape(loss, [])
    return loss


def _check_train_op(train_op, mode: str, graph: tf.Graph):
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ModelFnError(
                "EstimatorSpec: train_op is required in TRAIN mode; got None. "
                "Use optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())."
            )
        return None
    if not isinstance(train_op, tf.Operation) and isinstance(getattr(train_op, "op", None), tf.Operation):
        train_op = train_op.op  # a Tensor, or the result of assign_add on a resource variable
    if not isinstance(train_op, tf.Operation):
        raise ModelFnError(f"EstimatorSpec: train_op must be an Operation or Tensor; got {type(train_op).__name__}.")
    _check_in_graph("train_op", train_op, graph)
    return train_op


def _is_keras_metric(value) -> bool:
    return all(callable(getattr(value, a, None)) for a in ("result", "update_state", "reset_state"))


def tf_variable(variable):
    """The tf.Variable behind a Keras 3 variable (Keras 2 variables are tf.Variables)."""
    inner = getattr(variable, "_value", None)
    return variable if inner is None else inner


_FUNCTION_CALLS = frozenset({"StatefulPartitionedCall", "PartitionedCall"})


def _recorded_updates(metric, graph: tf.Graph) -> list:
    """The update ops a tf-keras metric recorded while built in a graph (`metric.updates`, what tf.estimator
    2.15 took), those of this graph."""
    try:
        recorded = list(getattr(metric, "updates", None) or ())
    except Exception:  # pylint: disable=broad-except  # a property that needs a layer's state Keras 3 lacks
        return []
    ops = [getattr(update, "op", update) for update in recorded]
    return [op for op in ops if isinstance(op, tf.Operation) and op.graph is graph]


def _keras_metric_ops(name: str, metric, graph: tf.Graph):
    """(value, update_op) for a Keras metric object updated inside model_fn.

    Its variables move to the local-variables collection: like tf.compat.v1
    metrics they are reset per evaluation, never read from a checkpoint.
    """
    variables = [tf_variable(v) for v in metric.variables]
    handles = {v.op for v in variables}
    updates = [
        op for op in graph.get_operations()
        if (op.type in state_updates._ASSIGN_TYPES  # pylint: disable=protected-access
            and state_updates.target_variable_op(op) in handles
            and not op.name.endswith("/Assign"))
        # tf-keras runs `update_state` as a tf.function: one call op takes the variables' handles.
        or (op.type in _FUNCTION_CALLS and any(t.op in handles for t in op.inputs))
    ]
    updates += [op for op in _recorded_updates(metric, graph) if op not in updates]
    if not updates:
        raise ModelFnError(
            f"EstimatorSpec: Keras metric eval_metric_ops[{name!r}] was never updated in this graph. "
            f"Call metric.update_state(labels, predictions) inside model_fn before returning it."
        )
    global_vars = graph.get_collection_ref(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
    for variable in variables:
        if variable in global_vars:
            global_vars.remove(variable)
        for key in (tf.compat.v1.GraphKeys.LOCAL_VARIABLES, tf.compat.v1.GraphKeys.METRIC_VARIABLES):
            if variable not in graph.get_collection(key):
                graph.add_to_collection(key, variable)
    return metric.result(), tf.group(*updates, name=f"{name.replace('/', '_')}_update")


def _check_metrics(metrics, graph: tf.Graph):
    if metrics is None:
        return {}
    if not isinstance(metrics, Mapping):
        raise ModelFnError(f"EstimatorSpec: eval_metric_ops must be a dict; got {type(metrics).__name__}.")
    checked = {}
    for name, value in metrics.items():
        if _is_keras_metric(value):
            value = _keras_metric_ops(name, value, graph)
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            raise ModelFnError(
                f"EstimatorSpec: eval_metric_ops[{name!r}] must be a (value_tensor, update_op) pair as "
                f"tf.compat.v1.metrics.* return, or a Keras metric object; got {value!r}."
            )
        metric_value, update = value
        if not isinstance(metric_value, tf.Tensor) or not isinstance(update, (tf.Tensor, tf.Operation)):
            raise ModelFnError(
                f"EstimatorSpec: eval_metric_ops[{name!r}] must hold (Tensor, Tensor or Operation); "
                f"got ({type(metric_value).__name__}, {type(update).__name__})."
            )
        _check_in_graph(f"eval_metric_ops[{name!r}]", metric_value, graph)
        _check_in_graph(f"eval_metric_ops[{name!r}] update", update, graph)
        checked[name] = (metric_value, update)
    return checked


def _check_export_outputs(export_outputs, mode: str, predictions):
    if mode != ModeKeys.PREDICT:
        return export_outputs
    if not export_outputs:
        return {DEFAULT_SERVING_KEY: PredictOutput(predictions)}
    if not isinstance(export_outputs, Mapping):
        raise ModelFnError(
            f"EstimatorSpec: export_outputs must be a dict of name -> ExportOutput; got {type(export_outputs).__name__}."
        )
    for key, value in export_outputs.items():
        if not isinstance(value, ExportOutput):
            raise ModelFnError(
                f"EstimatorSpec: export_outputs[{key!r}] must be a PredictOutput, ClassificationOutput or "
                f"RegressionOutput; got {type(value).__name__}."
            )
    outputs = dict(export_outputs)
    if DEFAULT_SERVING_KEY not in outputs:
        if len(outputs) > 1:
            raise ModelFnError(
                f"EstimatorSpec: export_outputs has {sorted(outputs)} but no {DEFAULT_SERVING_KEY!r}; with more "
                f"than one output, name the default one {DEFAULT_SERVING_KEY!r}."
            )
        outputs[DEFAULT_SERVING_KEY] = next(iter(outputs.values()))
    return outputs

