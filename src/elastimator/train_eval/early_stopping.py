"""Early stopping: hooks that stop training when evaluation metrics say so.

The chief checks a predicate over the evaluation results (read from the eval
event files, so it works whether evaluation runs in-process or in a separate
evaluator). When it fires, the chief raises a stop flag held on the first
parameter server (or locally without one) and stops; every worker polls the
flag and stops too.
"""

from __future__ import annotations

import logging
import operator
from typing import Callable

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.estimator import step_after_call
from elastimator.train_eval.eval_events import read_eval_events

logger = logging.getLogger("elastimator")
_FLAG_NAME = "signal_early_stopping/stop"


class EarlyStoppingHook(tf.compat.v1.train.SessionRunHook):
    """Stops every training process once `should_stop_fn()` returns True on the chief.

    Args:
        should_stop_fn: No-argument callable; checked on the chief only.
        is_chief: Whether this process decides (chief) or follows (worker).
        flag_device: Where the shared stop flag lives ("" for local training).
        run_every_secs / run_every_steps: How often to check.
    """

    several_steps_per_call = True  # acts on the global step (elastimator.estimator.step.steps_per_call)

    def __init__(self, should_stop_fn: Callable[[], bool], *, is_chief: bool, flag_device: str,
                 run_every_secs: float | None = 60, run_every_steps: int | None = None):
        if not callable(should_stop_fn):
            raise ConfigError(f"should_stop_fn must be callable; got {type(should_stop_fn).__name__}.")
        if (run_every_secs is None) == (run_every_steps is None):
            raise ConfigError(
                "Early stopping needs exactly one of run_every_secs and run_every_steps; got "
                f"run_every_secs={run_every_secs}, run_every_steps={run_every_steps}."
            )
        self._should_stop = should_stop_fn
        self._is_chief = is_chief
        self._device = flag_device
        self._timer = tf.compat.v1.train.SecondOrStepTimer(every_secs=run_every_secs, every_steps=run_every_steps)

    def begin(self):
        self._global_step = step_after_call()
        # Local, so it is never saved in (or restored from) a checkpoint; the chief
        # initializes it, workers only read it once the chief has.
        with tf.compat.v1.device(self._device):
            flag = tf.compat.v1.get_variable(
                _FLAG_NAME, shape=[], dtype=tf.bool, initializer=tf.compat.v1.zeros_initializer(),
                trainable=False, use_resource=True,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES] if self._is_chief else [],
            )
        self._raise_flag = flag.assign(True)
        self._flag_up = tf.cond(tf.compat.v1.is_variable_initialized(flag), flag.read_value,
                                lambda: tf.constant(False))

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if not self._timer.should_trigger_for_step(step):
            return
        self._timer.update_last_triggered_step(step)
        session = run_context.session
        if self._is_chief:
            if self._should_stop():
                logger.info("Early stopping at global step %d: the stopping condition was met.", step)
                session.run(self._raise_flag)
                run_context.request_stop()
        elif session.run(self._flag_up):
            logger.info("Early stopping at global step %d: the chief raised the stop flag.", step)
            run_context.request_stop()


def _flag_device(config) -> str:
    cluster = config.cluster
    return "/job:ps/task:0" if cluster.is_distributed and cluster.num_ps_replicas else ""


def make_early_stopping_hook(estimator, should_stop_fn, run_every_secs=60, run_every_steps=None):
    """A hook that stops training (on every process) when `should_stop_fn()` is True.

    Example:
        >>> hook = make_early_stopping_hook(estimator, lambda: time.time() > deadline)
        >>> train_and_evaluate(estimator, TrainSpec(input_fn, hooks=[hook]), eval_spec)
    """
    return EarlyStoppingHook(should_stop_fn, is_chief=estimator.config.is_chief,
                             flag_device=_flag_device(estimator.config), run_every_secs=run_every_secs,
                             run_every_steps=run_every_steps)


def _results(estimator, eval_dir, min_steps):
    directory = eval_dir or estimator.eval_dir()
    results = read_eval_events(f"{directory}/*.tfevents.*")
    return {step: values for step, values in sorted(results.items()) if step >= min_steps}


def _metric(step_results, metric_name, step):
    if metric_name not in step_results:
        raise ConfigError(
            f"Early stopping watches metric {metric_name!r}, but the evaluation at step {step} has only "
            f"{sorted(k for k in step_results if k != 'global_step')}."
        )
    return step_results[metric_name]


def _threshold_hook(compare, estimator, metric_name, threshold, eval_dir, min_steps, run_every_secs,
                    run_every_steps):
    def should_stop():
        return any(compare(_metric(values, metric_name, step), threshold)
                   for step, values in _results(estimator, eval_dir, min_steps).items())

    return make_early_stopping_hook(estimator, should_stop, run_every_secs, run_every_steps)


def _stalled_hook(better, estimator, metric_name, max_steps_without_improvement, eval_dir, min_steps,
                  run_every_secs, run_every_steps):
    if max_steps_without_improvement <= 0:
        raise ConfigError(f"max_steps_without_* must be > 0; got {max_steps_without_improvement}.")

    def should_stop():
        results = _results(estimator, eval_dir, min_steps)
        best_step, best_value = None, None
        for step, values in results.items():
            value = _metric(values, metric_name, step)
            if best_value is None or better(value, best_value):
                best_step, best_value = step, value
        return best_step is not None and max(results) - best_step >= max_steps_without_improvement

    return make_early_stopping_hook(estimator, should_stop, run_every_secs, run_every_steps)


def stop_if_higher_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                        run_every_steps=None):
    """Stops once an evaluation (at step >= min_steps) has `metric_name` > `threshold`."""
    return _threshold_hook(operator.gt, estimator, metric_name, threshold, eval_dir, min_steps, run_every_secs,
                           run_every_steps)


def stop_if_lower_hook(estimator, metric_name, threshold, eval_dir=None, min_steps=0, run_every_secs=60,
                       run_every_steps=None):
    """Stops once an evaluation (at step >= min_steps) has `metric_name` < `threshold`."""
    return _threshold_hook(operator.lt, estimator, metric_name, threshold, eval_dir, min_steps, run_every_secs,
                           run_every_steps)


def stop_if_no_increase_hook(estimator, metric_name, max_steps_without_increase, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    """Stops when `metric_name` has not increased for `max_steps_without_increase` global steps."""
    return _stalled_hook(operator.gt, estimator, metric_name, max_steps_without_increase, eval_dir, min_steps,
                         run_every_secs, run_every_steps)


def stop_if_no_decrease_hook(estimator, metric_name, max_steps_without_decrease, eval_dir=None, min_steps=0,
                             run_every_secs=60, run_every_steps=None):
    """Stops when `metric_name` has not decreased for `max_steps_without_decrease` global steps."""
    return _stalled_hook(operator.lt, estimator, metric_name, max_steps_without_decrease, eval_dir, min_steps,
                         run_every_secs, run_every_steps)
