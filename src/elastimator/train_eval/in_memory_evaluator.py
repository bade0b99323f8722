"""`InMemoryEvaluatorHook`: evaluates the model being trained every so many session calls, between
checkpoints, as `tf.estimator.experimental.InMemoryEvaluatorHook` did.

Each evaluation takes the training session's current variables (written to a
temporary directory outside model_dir, then removed) and runs the estimator's
ordinary `evaluate` on them, so its metrics, eval/ events and log line are those of
`evaluate`. For one training process: in a parameter-server job, evaluate with an
evaluator task instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.estimator import Estimator, check_hooks, make_saver


class InMemoryEvaluatorHook(tf.compat.v1.train.SessionRunHook):
    """Evaluates `input_fn` on the variables being trained: when the session starts, every `every_n_iter` session
    calls, and at the end (as 2.15's did, twice at a last step that is also an `every_n_iter` one).

    Args:
        estimator: The estimator being trained (its model_fn, params and model_dir are used).
        input_fn: The evaluation input_fn.
        steps: Batches per evaluation (None: until the input ends).
        hooks: Evaluation hooks.
        name: The evaluation's name (events go to eval_<name>/).
        every_n_iter: Evaluate after every this many session calls of the training.

    Example:
        >>> evaluator = InMemoryEvaluatorHook(estimator, eval_input_fn, every_n_iter=500)
        >>> estimator.train(train_input_fn, hooks=[evaluator])
    """

    def __init__(self, estimator, input_fn, steps=None, hooks=None, name=None, every_n_iter=100):
        if not isinstance(estimator, Estimator):
            raise ConfigError(f"InMemoryEvaluatorHook: estimator must be an Estimator; got {type(estimator).__name__}.")
        if isinstance(every_n_iter, bool) or not isinstance(every_n_iter, int) or every_n_iter < 1:
            raise ConfigError(f"InMemoryEvaluatorHook: every_n_iter must be a positive int; got {every_n_iter!r}.")
        self._estimator, self._input_fn, self._steps, self._name = estimator, input_fn, steps, name
        self._hooks = check_hooks("InMemoryEvaluatorHook hooks", hooks, ConfigError)
        self._every_n_iter = every_n_iter
        self._calls = 0
        self._saver = None
        self.results: dict | None = None
        """The metrics of the latest evaluation."""

    def begin(self):
        if self._estimator.config.cluster.is_distributed:
            raise ConfigError("InMemoryEvaluatorHook evaluates one training process's variables; in a cluster, "
                              "evaluate with an evaluator task (train_and_evaluate).")
        self._calls = 0
        self._saver = make_saver(self._estimator.config)
        self._saver.build()

    def after_create_session(self, session, coord):
        self._evaluate(session)  # the starting point, as 2.15's did

    def after_run(self, run_context, run_values):
        self._calls += 1
        if self._calls % self._every_n_iter == 0:
            self._evaluate(run_context.session)

    def end(self, session):
        self._evaluate(session)

    def _evaluate(self, session) -> None:
        directory = tempfile.mkdtemp(prefix="elastimator-in-memory-")
        try:
            path = self._saver.save(session, os.path.join(directory, "model.ckpt"), write_meta_graph=False,
                                    write_state=False)
            self.results = self._estimator.evaluate(self._input_fn, steps=self._steps, hooks=self._hooks,
                                                    checkpoint_path=path, name=self._name)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
