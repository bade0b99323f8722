"""Adding evaluation metrics to an estimator, and windowed training metrics."""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import ConfigError
from elastimator.estimator import Estimator, ModeKeys, call_model_fn, fn_args, step_after_call

_METRIC_FN_ARGS = ("labels", "predictions", "features", "config")


def add_metrics(estimator: Estimator, metric_fn: Callable) -> Estimator:
    """Returns an Estimator like `estimator` whose evaluation also reports `metric_fn`'s metrics.

    Args:
        metric_fn: Takes any of `labels`, `predictions`, `features`, `config` and
            returns a dict of name -> (value, update_op) or Keras metric. Its
            metrics replace the model's own metrics of the same name.

    Example:
        >>> def my_auc(labels, predictions):
        ...     return {"auc": tf.compat.v1.metrics.auc(labels, predictions["logistic"])}
        >>> estimator = add_metrics(estimator, my_auc)
    """
    if not isinstance(estimator, Estimator):
        raise ConfigError(f"add_metrics: estimator must be an elastimator.Estimator; got {type(estimator).__name__}.")
    args = fn_args(metric_fn)
    unknown = [a for a in args if a not in _METRIC_FN_ARGS]
    if not callable(metric_fn) or unknown or not args:
        raise ConfigError(
            f"add_metrics: metric_fn must take some of {list(_METRIC_FN_ARGS)} (by name); it takes {list(args)}."
        )
    original = estimator.model_fn

    def model_fn(features, labels, mode, params, config):
        spec = call_model_fn(original, features, labels, mode, params, config)
        if mode != ModeKeys.EVAL:
            return spec
        available = {"labels": labels, "predictions": spec.predictions, "features": features, "config": config}
        extra = metric_fn(**{a: available[a] for a in args})
        if not isinstance(extra, dict):
            raise ConfigError(f"add_metrics: metric_fn must return a dict of metrics; got {type(extra).__name__}.")
        return spec._replace(eval_metric_ops={**spec.eval_metric_ops, **extra})

    return Estimator(model_fn, model_dir=estimator.model_dir, config=estimator.config,
                     params=estimator.params or None, warm_start_from=estimator.warm_start_settings)


class ResetMetricsHook(tf.compat.v1.train.SessionRunHook):
    """Resets streaming metrics every `every_n_steps` global steps, so they report a window.

    tf.compat.v1.metrics accumulate over the whole run; a training AUC after a
    million steps says little about the last thousand. Create the training
    metrics under a variable scope, update them with the train op, and pass this
    hook in `training_hooks`: summaries then show each window's value.

    Example:
        >>> with tf.compat.v1.variable_scope("train_metrics"):
        ...     auc, auc_update = tf.compat.v1.metrics.auc(labels, probabilities)
        >>> tf.compat.v1.summary.scalar("train_auc", auc)
        >>> train_op = tf.group(train_op, auc_update)
        >>> spec = EstimatorSpec(mode, loss=loss, train_op=train_op,
        ...                      training_hooks=[ResetMetricsHook(1000, scope="train_metrics")])

    Args:
        every_n_steps: Window length in global steps.
        scope: Reset the local (metric) variables whose names start with this
            scope; None resets every metric variable in the graph.
    """

    several_steps_per_call = True  # acts on the global step (elastimator.estimator.step.steps_per_call)

    def __init__(self, every_n_steps: int, scope: str | None = None):
        if not is_int(every_n_steps, minimum=1):
            raise ConfigError(f"ResetMetricsHook: every_n_steps must be a positive int; got {every_n_steps!r}.")
        self._every, self._scope = every_n_steps, scope
        self._window: int | None = None

    def begin(self):
        candidates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES)
        prefix = None if self._scope is None else self._scope.rstrip("/") + "/"
        variables = [v for v in candidates if prefix is None or v.op.name.startswith(prefix)]
        if not variables:
            raise ConfigError(
                f"ResetMetricsHook: no metric (local) variables under scope {self._scope!r}. Create the metrics "
                "inside tf.compat.v1.variable_scope(scope) in model_fn."
            )
        self._reset = tf.compat.v1.variables_initializer(variables, name="reset_windowed_metrics")
        self._global_step = step_after_call()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        window = int(run_values.results) // self._every
        if self._window is not None and window != self._window:
            run_context.session.run(self._reset)
        self._window = window
