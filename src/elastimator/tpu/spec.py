"""`TPUEstimatorSpec`: what a TPUEstimator model_fn returns, and the `EstimatorSpec` it means off a TPU.

Its TPU-shaped parts become their CPU/GPU equivalents, as tf.estimator 2.15's
`as_estimator_spec` made them:

* `eval_metrics=(metric_fn, tensors)`: `metric_fn(*tensors)` (or `(**tensors)` for a dict) gives the
  `eval_metric_ops`;
* `scaffold_fn`: called once the model is built; its Scaffold is the spec's;
* `host_call=(fn, tensors)`: `fn(*tensors)` (or `(**tensors)`) is built in the graph and its ops run with
  every training, evaluation and prediction step (typically summaries it writes itself).
"""

from __future__ import annotations

from typing import Mapping

import tensorflow as tf

from elastimator._records import record_type
from elastimator.errors import ModelFnError
from elastimator.estimator import EstimatorSpec

_SUMMARY_WRITER_INIT = "_SUMMARY_WRITER_V2"
_FIELDS = ("mode", "predictions", "loss", "train_op", "eval_metrics", "export_outputs", "scaffold_fn", "host_call",
           "training_hooks", "evaluation_hooks", "prediction_hooks")


def _check_call(name: str, value) -> None:
    if value is None:
        return
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and callable(value[0])
            and isinstance(value[1], (tuple, list, Mapping))):
        raise ModelFnError(f"TPUEstimatorSpec: {name} must be a (function, tensors) pair, tensors a list or a dict; "
                           f"got {value!r}.")


def _call(pair):
    fn, tensors = pair
    return fn(**tensors) if isinstance(tensors, Mapping) else fn(*tensors)


class TPUEstimatorSpec(record_type("TPUEstimatorSpec", _FIELDS)):
    """A TPUEstimator model_fn's result, with 2.15's fields; `as_estimator_spec()` is its CPU/GPU meaning."""

    __slots__ = ()

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metrics=None, export_outputs=None,
                scaffold_fn=None, host_call=None, training_hooks=None, evaluation_hooks=None, prediction_hooks=None):
        _check_call("eval_metrics", eval_metrics)
        _check_call("host_call", host_call)
        if scaffold_fn is not None and not callable(scaffold_fn):
            raise ModelFnError(f"TPUEstimatorSpec: scaffold_fn must be a function returning a Scaffold; got "
                               f"{scaffold_fn!r}.")
        return super().__new__(cls, mode, predictions, loss, train_op, eval_metrics, export_outputs, scaffold_fn,
                               host_call, tuple(training_hooks or ()), tuple(evaluation_hooks or ()),
                               tuple(prediction_hooks or ()))

    def as_estimator_spec(self) -> EstimatorSpec:
        """The `EstimatorSpec` this spec means on CPU or GPU."""
        metrics = _call(self.eval_metrics) if self.eval_metrics is not None else None
        hooks: tuple = ()
        if self.host_call is not None:
            hooks = (_HostCallHook(_call(self.host_call)),)
        scaffold = self.scaffold_fn() if self.scaffold_fn is not None else None
        return EstimatorSpec(
            self.mode, predictions=self.predictions, loss=self.loss, train_op=self.train_op,
            eval_metric_ops=metrics, export_outputs=self.export_outputs, scaffold=scaffold,
            training_hooks=self.training_hooks + hooks, evaluation_hooks=self.evaluation_hooks + hooks,
            prediction_hooks=self.prediction_hooks + hooks)


class _HostCallHook(tf.compat.v1.train.SessionRunHook):
    """Runs a host_call's ops with every step (so training runs one step per session call, as 2.15's did off
    a TPU), after initializing the TF2 summary writers they may write through."""

    def __init__(self, ops):
        self._ops = ops

    def begin(self):
        # The initializers of the TF2 summary writers made in graph mode (TensorFlow's collection for them, which
        # tf.compat.v1.summary.initialize runs only while a writer is the default).
        self._writers = tf.compat.v1.get_collection(_SUMMARY_WRITER_INIT)

    def after_create_session(self, session, coord):
        if self._writers:
            session.run(self._writers)

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._ops)
