"""`train_and_evaluate`: train, evaluate and export, locally or as one role of a cluster."""

from __future__ import annotations

import logging
import time
from typing import Sequence

import tensorflow as tf

from elastimator.errors import ClusterError, ConfigError
from elastimator.estimator import CheckpointDir, Estimator, TaskType, is_collective, log_train_and_evaluate_start
from elastimator.train_eval import eval_rounds, servers
from elastimator.train_eval import exporters as exporter_lib
from elastimator.train_eval.policies import EvalRecord
from elastimator.train_eval.specs import EvalSpec, TrainSpec

logger = logging.getLogger("elastimator")


class _EvaluateAfterSave(tf.compat.v1.train.CheckpointSaverListener):
    """Local mode: evaluates (and exports) after checkpoint saves the policy selects, and at the end."""

    def __init__(self, estimator, eval_spec: EvalSpec, max_steps: int | None, listener=None, start_step: int = 0):
        self._estimator, self._spec, self._max_steps = estimator, eval_spec, max_steps
        self._start_step = start_step
        """The global step training starts from: its checkpoint (saved again as the session starts) is not
        evaluated, as 2.15 skipped the first save of a train_and_evaluate."""
        self._listener = listener
        self._last: EvalRecord | None = None
        self.last_round: eval_rounds.RoundResult | None = None

    def _round(self, step: int, final: bool) -> bool:
        """Evaluates; False when a continuous-evaluation listener asks to stop training."""
        if self._listener is not None and not final and not self._listener.before_eval():
            return False
        started = time.monotonic()
        checkpoint = CheckpointDir(self._estimator.model_dir).newest()
        self.last_round = eval_rounds.evaluation_round(self._estimator, self._spec, checkpoint, final)
        self._last = EvalRecord(step, started)
        if self._listener is not None and not final:
            return bool(self._listener.after_eval(eval_rounds.EvalResult(
                eval_rounds.EvalResult.EVALUATED, self.last_round.metrics, checkpoint)))
        return True

    def after_save(self, session, global_step_value):
        step = int(global_step_value)
        if step <= self._start_step:  # nothing trained yet
            return None
        final = self._max_steps is not None and step >= self._max_steps
        if final or self._spec.policy.should_evaluate(self._last, step, time.monotonic()):
            if not self._round(step, final):
                logger.info("The continuous-evaluation listener asked to stop training at step %d.", step)
                return True  # a CheckpointSaverListener's True stops training
        return None

    def end(self, session, global_step_value):
        step = int(global_step_value)
        if self.last_round is None or self.last_round.step != step:
            self._round(step, final=True)
        else:  # evaluated this checkpoint already; at most the final exports are missing
            checkpoint = CheckpointDir(self._estimator.model_dir).newest()
            self.last_round = eval_rounds.finalize(self._estimator, self._spec, self.last_round, checkpoint)


def _check_args(estimator, train_spec, eval_spec) -> None:
    if not isinstance(estimator, Estimator):
        raise ConfigError(f"train_and_evaluate: estimator must be an elastimator.Estimator; got "
                          f"{type(estimator).__name__}.")
    if not isinstance(train_spec, TrainSpec):
        raise ConfigError(f"train_and_evaluate: train_spec must be a TrainSpec; got {type(train_spec).__name__}.")
    if not isinstance(eval_spec, EvalSpec):
        raise ConfigError(f"train_and_evaluate: eval_spec must be an EvalSpec; got {type(eval_spec).__name__}.")


def _run_local(estimator, train_spec: TrainSpec, eval_spec: EvalSpec, listener=None, extra_hooks=()):
    config = estimator.config
    if not (config.save_checkpoints_steps or config.save_checkpoints_secs):
        raise ConfigError(
            "train_and_evaluate evaluates after checkpoints, but RunConfig saves none (save_checkpoints_steps "
            "and save_checkpoints_secs are both None). Set one of them."
        )
    log_train_and_evaluate_start(config)
    start_step = CheckpointDir(estimator.model_dir).resume_point().step
    evaluator = _EvaluateAfterSave(estimator, eval_spec, train_spec.max_steps, listener, start_step)
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks) + list(extra_hooks),
                    max_steps=train_spec.max_steps, saving_listeners=list(train_spec.saving_listeners) + [evaluator])
    result = evaluator.last_round
    if result is None:  # max_steps was already reached: evaluate what is there
        checkpoint = CheckpointDir(estimator.model_dir).newest()
        result = eval_rounds.evaluation_round(estimator, eval_spec, checkpoint, final=True)
    return result.metrics, result.export_results


def _run_trainer(estimator, train_spec: TrainSpec, extra_hooks=()):
    config = estimator.config
    if is_collective(config.train_distribute):
        server = None if servers.strategy_started_server(config) else servers.start_server(config)
        logger.info("%s %d: training with %d worker(s), all-reducing over the network.", config.task_type,
                    config.task_id, config.num_worker_replicas)
    else:
        server = servers.start_server(config)
        logger.info("%s %d: training against %d parameter server(s).", config.task_type, config.task_id,
                    config.num_ps_replicas)
    if config.is_chief:
        _check_not_after_the_end(estimator)
        eval_rounds.clear_training_done(estimator.model_dir)
    hooks = list(train_spec.hooks) + list(extra_hooks)
    if not config.is_chief:
        hooks.append(servers.StrandedWorkerExit(lambda: eval_rounds.training_done_at(estimator.model_dir)))
    estimator.train(train_spec.input_fn, hooks=hooks, max_steps=train_spec.max_steps,
                    saving_listeners=train_spec.saving_listeners if config.is_chief else None)
    if config.is_chief:
        final = CheckpointDir(estimator.model_dir).newest_step()
        eval_rounds.mark_training_done(estimator.model_dir, final, config.cluster_spec.as_dict())
    if config.num_ps_replicas and server is not None:
        servers.signal_done(config, server.target)
    return None, []


PS_GONE_SECS = 30.0
"""How long a chief restarted after its job's training ended looks for the parameter servers before it says they are
gone (they shut down when the chief told them training was over)."""


def _check_not_after_the_end(estimator) -> None:
    """A chief started in the cluster whose training already ended (its train_done marker names this cluster) and
    whose parameter servers are gone: one error that says so, in seconds, where it would wait for them up to
    session_creation_timeout_secs (two hours by default)."""
    config = estimator.config
    record = eval_rounds.training_done_record(estimator.model_dir)
    if record is None or record.get("cluster") != config.cluster_spec.as_dict() or not config.num_ps_replicas:
        return
    up = servers.reachable_ps(config, within_secs=PS_GONE_SECS)
    if len(up) == config.num_ps_replicas:
        return  # the same cluster trains again (its parameter servers are up): a new run in this model_dir
    raise ClusterError(
        f"chief {config.task_id}: the training of this job already ended (at global step "
        f"{record.get('global_step')}, {eval_rounds.DONE_MARKER} in {estimator.model_dir}) and its parameter "
        f"server(s) shut down then ({config.num_ps_replicas - len(up)} of {config.num_ps_replicas} no longer answer "
        f"after {PS_GONE_SECS:.0f} s); this restarted chief has nothing to train with. The model and its exports "
        f"are in the model_dir. To train further there, start the whole job again (parameter servers included).")


def _run_ps(estimator):
    config = estimator.config
    server = servers.start_server(config)
    logger.info("ps %d: serving at %s.", config.task_id, server.target)
    servers.serve_until_done(server, config)
    return None, []


def _run_evaluator(estimator, train_spec: TrainSpec, eval_spec: EvalSpec, listener=None):
    result = eval_rounds.run_evaluator(estimator, eval_spec, train_spec.max_steps, listener=listener)
    return (result.metrics, result.export_results) if result else (None, [])


def train_only(estimator: Estimator, train_spec: TrainSpec, exporters: Sequence = ()) -> list:
    """Trains without evaluating, locally or as this process's role (chief, worker or ps); then the chief runs
    `exporters` once on the final checkpoint (as final exports, with the global step as their metrics).

    Returns:
        The paths the exporters wrote (empty for workers and parameter servers).
    """
    config = estimator.config
    if config.task_type == TaskType.EVALUATOR:
        raise ConfigError("an evaluator task needs an EvalSpec; this job evaluates nothing. Remove the evaluator "
                          "from the cluster or add evaluation data.")
    if not config.cluster.is_distributed:
        estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps,
                        saving_listeners=train_spec.saving_listeners)
    elif config.task_type == TaskType.PS:
        _run_ps(estimator)
    else:
        _run_trainer(estimator, train_spec)
    if not config.is_chief or not exporters:
        return []
    resume = CheckpointDir(estimator.model_dir).resume_point()
    checkpoint, metrics = resume.checkpoint, {"global_step": resume.step}
    return exporter_lib.run_all(estimator, exporters, checkpoint, metrics, final=True)


def train_and_evaluate(estimator: Estimator, train_spec: TrainSpec, eval_spec: EvalSpec):
    """Trains, evaluates and exports; what this process does depends on its role in TF_CONFIG.

    * No cluster: trains, evaluates after checkpoints (as `eval_spec.policy` allows),
      always evaluates the final step, and runs the exporters after each evaluation.
    * chief / worker: trains against the parameter servers; the chief checkpoints.
    * ps: serves variables until the chief and workers report the end of training.
    * evaluator: follows new checkpoints, evaluates, exports; stops after the final one.

    Returns:
        (metrics, export_results) of the last evaluation this process ran;
        (None, []) for roles that do not evaluate.
    """
    _check_args(estimator, train_spec, eval_spec)
    config = estimator.config
    role = config.task_type
    if role == TaskType.EVALUATOR:
        return _run_evaluator(estimator, train_spec, eval_spec)
    if not config.cluster.is_distributed:
        return _run_local(estimator, train_spec, eval_spec)
    if role == TaskType.PS:
        return _run_ps(estimator)
    return _run_trainer(estimator, train_spec)
