"""tf.estimator 2.15's `_TrainingExecutor` and its continuous-evaluation listener, for frameworks that drive
`train_and_evaluate`'s roles themselves (EasyRec builds one with a listener of its own and calls `run()`).

The executor keeps 2.15's constructor, `run()` dispatching on the task type, and one `run_<task type>()`
method per role; each role runs elastimator's implementation of it (`train_and_evaluate.py`), so the
distributed bookkeeping (the evaluator's final checkpoint, parameter servers that exit) is the same as
`train_and_evaluate`'s. A subclass may override any `run_*` method, as it could in 2.15.
"""

from __future__ import annotations

import logging

from elastimator.errors import ConfigError
from elastimator.estimator import TaskType
from elastimator.train_eval import train_and_evaluate as roles
from elastimator.train_eval.eval_rounds import EvalResult
from elastimator.train_eval.specs import EvalSpec, TrainSpec

logger = logging.getLogger("elastimator")

_EvalResult = EvalResult
"""2.15's name for what `_ContinuousEvalListener.after_eval` is given."""


class _ContinuousEvalListener:
    """Told before and after each evaluation of `train_and_evaluate`; returning False stops it.

    Locally, False stops training (evaluation follows the checkpoints training saves); on an evaluator, it
    stops evaluating.
    """

    def before_eval(self) -> bool:
        """Called before an evaluation; False stops."""
        return True

    def after_eval(self, eval_result) -> bool:  # pylint: disable=unused-argument
        """Called with the `_EvalResult` (status, metrics, checkpoint_path) of an evaluation; False stops."""
        return True


def _assert_eval_spec(eval_spec) -> None:
    """Raises TypeError unless `eval_spec` is an EvalSpec (2.15's check, made before anything starts)."""
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError(f"`eval_spec` must have type `tf.estimator.EvalSpec`. Got: {type(eval_spec)}")


class _TrainingExecutor:
    """Runs training and evaluation for this process's role, as 2.15's executor did.

    Args:
        estimator: An `Estimator`.
        train_spec: A `TrainSpec`.
        eval_spec: An `EvalSpec`.
        train_hooks: Extra hooks for training, besides `train_spec.hooks`.
        continuous_eval_listener: A `_ContinuousEvalListener` (default: one that never stops).
    """

    def __init__(self, estimator, train_spec, eval_spec, train_hooks=None, continuous_eval_listener=None):
        from elastimator.estimator import Estimator  # pylint: disable=import-outside-toplevel

        if not isinstance(estimator, Estimator):
            raise TypeError(f"`estimator` must have type `tf.estimator.Estimator`. Got: {type(estimator)}")
        if not isinstance(train_spec, TrainSpec):
            raise TypeError(f"`train_spec` must have type `tf.estimator.TrainSpec`. Got: {type(train_spec)}")
        _assert_eval_spec(eval_spec)
        listener = continuous_eval_listener or _ContinuousEvalListener()
        if not isinstance(listener, _ContinuousEvalListener):
            raise TypeError("`continuous_eval_listener` must have type `_ContinuousEvalListener`. "
                            f"Got: {type(listener)}")
        self._estimator, self._train_spec, self._eval_spec = estimator, train_spec, eval_spec
        self._train_hooks = list(train_hooks or [])
        self._continuous_eval_listener = listener

    @property
    def estimator(self):
        return self._estimator

    def run(self):
        """Runs what this process's role does; (metrics, export results) where it evaluated, else None
        (2.15's return values)."""
        config = self._estimator.config
        if not config.cluster.is_distributed and config.task_type != TaskType.EVALUATOR:
            return self.run_local()
        if not config.task_type:
            raise ConfigError("TF_CONFIG describes a cluster but no task type for this process. Set "
                              "TF_CONFIG's task, e.g. {\"type\": \"worker\", \"index\": 0}.")
        if config.task_type == TaskType.EVALUATOR:
            return self.run_evaluator()
        method = getattr(self, f"run_{config.task_type}", None)
        if method is None:
            raise ConfigError(f"Task type {config.task_type!r} is not supported: expected one of chief, "
                              "worker, ps, evaluator, master.")
        return method()

    def run_chief(self):
        roles._run_trainer(self._estimator, self._train_spec, self._train_hooks)  # pylint: disable=protected-access

    def run_worker(self):
        roles._run_trainer(self._estimator, self._train_spec, self._train_hooks)  # pylint: disable=protected-access

    def run_master(self):
        self.run_chief()

    def run_ps(self):
        roles._run_ps(self._estimator)  # pylint: disable=protected-access

    def run_evaluator(self):
        metrics, exports = roles._run_evaluator(  # pylint: disable=protected-access
            self._estimator, self._train_spec, self._eval_spec, self._continuous_eval_listener)
        return None if metrics is None else (metrics, exports)

    def run_local(self):
        return roles._run_local(self._estimator, self._train_spec, self._eval_spec,  # pylint: disable=protected-access
                                self._continuous_eval_listener, self._train_hooks)


def _is_google_env() -> bool:
    """2.15 asked whether it ran inside Google; it never does here."""
    return False
