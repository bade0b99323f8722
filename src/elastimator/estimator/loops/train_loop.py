"""`Estimator.train`: the training loop in a monitored session."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Sequence

import tensorflow as tf

from elastimator._validate import is_int
from elastimator.embedding import eviction as embedding_eviction
from elastimator.errors import ClusterError, ConfigError
from elastimator.estimator import log_lines
from elastimator.estimator import tf_internals
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.contract.tf_config import TaskType
from elastimator.estimator.graph import effects, model_graph, replicas
from elastimator.estimator.loops import call_plan, hooked_session, interrupt, kept_graph, kept_training, peer_watch
from elastimator.estimator.loops import sessions
from elastimator.estimator.loops import hooks as engine_hooks
from elastimator.estimator.saving import checkpoints, saver_hook
from elastimator.estimator.step import multi_step, steps_per_call, training_step
from elastimator.estimator.step.training_step import TrainingStep

logger = logging.getLogger("elastimator")


def _check_steps(steps, max_steps) -> None:
    if steps is not None and max_steps is not None:
        raise ConfigError(f"train: pass steps or max_steps, not both; got steps={steps}, max_steps={max_steps}.")
    for name, value in (("steps", steps), ("max_steps", max_steps)):
        if value is not None and not is_int(value, minimum=1):
            raise ConfigError(f"train: {name} must be a positive int or None; got {value!r}.")


def _default_hooks(step: TrainingStep, scaffold, config, model_dir, saving_listeners,
                   plan: multi_step.ExecutionPlanHook | None) -> list:
    # Order matters: the plan sizes the call before anything asks where it ends, and the NaN check
    # runs before the checkpoint saver in each after_run.
    hooks: list = [plan] if plan is not None else []
    hooks.append(engine_hooks.NanLossHook(step.loss, step.global_step, model_dir))
    # The steps/s line comes before the loss line, as in 2.15.
    if config.log_step_count_steps and config.is_chief:
        hooks.append(tf.compat.v1.train.StepCounterHook(
            every_n_steps=config.log_step_count_steps, output_dir=model_dir))
    if config.log_step_count_steps:
        hooks.append(engine_hooks.ProgressLogHook(step.loss, step.global_step, config.log_step_count_steps))
    if not config.is_chief:
        return hooks
    if config.save_summary_steps:
        hooks.append(tf.compat.v1.train.SummarySaverHook(
            save_steps=config.save_summary_steps, output_dir=model_dir, scaffold=scaffold))
    if config.save_checkpoints_steps or config.save_checkpoints_secs:
        saver = saver_hook.CheckpointSaverHook(
            model_dir,
            save_secs=config.save_checkpoints_secs,
            save_steps=config.save_checkpoints_steps,
            scaffold=scaffold,
            # Eviction first: the user's listeners see the checkpoint that is saved.
            listeners=embedding_eviction.eviction_listeners(tf.compat.v1.get_default_graph()) + list(saving_listeners),
            save_graph_def=config.checkpoint_save_graph_def,
        )
        # The step it fetches is the ordered read right before a call's last step, so that step plus one is
        # where the call ends. Left at TensorFlow's default (a million steps per call, for TPU loops), the
        # hook runs a second session call after every step to read the global step again.
        tf_internals.set_steps_per_run(saver, 1)
        hooks.append(saver)
    elif saving_listeners:
        raise ConfigError(
            "train: saving_listeners need checkpoints, but RunConfig has save_checkpoints_steps and "
            "save_checkpoints_secs both None. Set one of them."
        )
    return hooks


def _training_step(built: model_graph.ModelGraph, config, steps, max_steps, restored_step: int, hooks: list,
                   ) -> tuple[TrainingStep, multi_step.ExecutionPlanHook | None]:
    """What one session call produces; with several steps per call, the looped step and the hook that sizes
    each call. `hooks` are the training's hooks that elastimator did not make (see steps_per_call)."""
    spec = built.spec
    most, pace = config.steps_per_execution, None
    if built.replicas > 1:
        if most not in (None, 1):
            raise ConfigError(
                f"RunConfig: steps_per_execution={most} with train_distribute over {built.replicas} replicas; a "
                "strategy's replicas run one step per session call. Leave steps_per_execution None (or 1).")
        most = 1
    if most is None:
        reason = steps_per_call.why_one_step(
            hooks=hooks, steps_to_train=steps_per_call.steps_to_train(steps, max_steps, restored_step),
            in_cluster=config.cluster.is_distributed, check_step=_copyable(built))
        logger.info(steps_per_call.describe(reason))
        most, pace = (1, None) if reason else (steps_per_call.MOST_STEPS, steps_per_call.Pace())
    if most == 1:
        global_step = multi_step.after_call(multi_step.order_step_read(built.global_step))
        return training_step.single(spec.train_op, spec.loss, global_step, built.step_outputs), None
    execution, step = multi_step.build(train_op=spec.train_op, loss=spec.loss, global_step=built.global_step,
                                       steps=most, outputs=built.step_outputs)
    return step, multi_step.ExecutionPlanHook(execution, num_steps=steps, last_step=max_steps, pace=pace)


def _peers(config) -> list[str]:
    """The addresses of the other trainers (chief and workers) of this process's cluster."""
    spec = config.cluster_spec.as_dict()
    return [address for job in (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER)
            for index, address in enumerate(spec.get(job, []))
            if (job, index) != (config.task_type, config.task_id)]


def train(
    estimator,
    input_fn: Callable,
    hooks: Sequence | None = None,
    steps: int | None = None,
    max_steps: int | None = None,
    saving_listeners: Sequence | None = None,
) -> float | None:
    """Trains until input ends, `steps` more steps, or global step `max_steps`.

    Returns:
        The loss of the last step run, or None when no step ran.
    """
    _check_steps(steps, max_steps)
    user_hooks = engine_hooks.check_hooks("hooks", hooks, training=True)
    listeners = list(saving_listeners or [])
    for listener in listeners:
        if not isinstance(listener, tf.compat.v1.train.CheckpointSaverListener):
            raise TypeError(
                f"saving_listeners must be tf.compat.v1.train.CheckpointSaverListener instances; "
                f"got {type(listener).__name__}."
            )
    model_dir, config = estimator.model_dir, estimator.config
    directory = checkpoints.CheckpointDir(model_dir)
    if config.is_chief:
        directory.repair()
    resume = directory.resume_point()
    latest, restored_step = resume.checkpoint, resume.step
    if max_steps is not None and restored_step >= max_steps:
        log_lines.skipping_training()
        return None
    if latest is not None and config.is_chief:
        logger.debug("Resuming from step %d (%s).", restored_step, latest)  # TensorFlow says "Restoring parameters"
    reuse = kept_training.reuse_for(estimator)
    if reuse is not None and latest is not None:
        to_train = steps_per_call.steps_to_train(steps, max_steps, restored_step)
        kept = kept_training.start(reuse, input_fn, lambda parts, session_kept: _steps_fit(
            parts, config, user_hooks, to_train, session_kept))
        if kept is not None:
            warm, input_hook = kept
            logger.info("Training in the graph and session kept from the last train call.")
            with warm.graph.as_default():
                plan = _plan(warm.payload, config, steps, max_steps)
                loss = _run(estimator, warm.payload, plan, [input_hook], [], user_hooks, listeners, steps, max_steps,
                            _Keeping(reuse, latest, warm=warm))
            if loss is not _BUILD_AFRESH:
                return loss
    with tf.Graph().as_default():
        strategy = config.train_distribute
        if replicas.replicas_of(strategy) > 1:
            built = replicas.build_for(estimator, ModeKeys.TRAIN, input_fn, strategy)
        else:
            built = model_graph.build_for(estimator, ModeKeys.TRAIN, input_fn)
        spec = built.spec
        if latest is None and estimator.warm_start_settings is not None:
            estimator.warm_start_settings.apply()
        model_hooks = list(spec.training_hooks) + (list(spec.training_chief_hooks) if config.is_chief else [])
        step, plan = _training_step(built, config, steps, max_steps, restored_step,
                                    user_hooks + list(built.input_hooks) + model_hooks)
        scaffold = sessions.make_scaffold(spec, config, ready_once_made=config.is_chief)
        if not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SAVERS):
            # Where a user's CheckpointSaverHook (without a saver or scaffold) finds the training's saver.
            tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, scaffold.saver)
        parts = kept_graph.TrainingParts(built=built, step=step, execution=plan.execution if plan else None,
                                            scaffold=scaffold)
        keeping = _Keeping(reuse, latest, model_hooks=model_hooks) if reuse is not None else None
        return _run(estimator, parts, plan, list(built.input_hooks), model_hooks, user_hooks, listeners, steps,
                    max_steps, keeping)


def _steps_fit(parts: kept_graph.TrainingParts, config, user_hooks: list, to_train: int | None,
               session_kept: bool) -> call_plan.Decision:
    """Whether a kept graph runs a call as a graph built for it would: several steps per call, or one
    (`call_plan.steps_fit`)."""
    return call_plan.steps_fit(call_plan.StepFacts(
        steps_per_execution=config.steps_per_execution is not None, kept_loop=parts.execution is not None,
        session_kept=session_kept, hook_needs_one_step=steps_per_call.hook_needing_one_step(user_hooks),
        few_steps=steps_per_call.few_steps(to_train),
        step_not_copyable=parts.not_copyable(lambda: steps_per_call.not_copyable(_copyable(parts.built)))))


def _copyable(built: model_graph.ModelGraph) -> Callable[[], object]:
    """Raises ConfigError when `built`'s step cannot be copied into a loop of steps (`steps_per_call`)."""
    return lambda: multi_step.check_copyable(built.spec.train_op, built.spec.loss, built.step_outputs)


def _plan(parts: kept_graph.TrainingParts, config, steps, max_steps) -> multi_step.ExecutionPlanHook | None:
    """A kept graph's plan hook for this call (none for one step per call), its calls sized by pace where
    `steps_per_execution` is None, as `_training_step` sized them."""
    if parts.execution is None:
        return None
    return multi_step.ExecutionPlanHook(parts.execution, num_steps=steps, last_step=max_steps,
                                        pace=steps_per_call.Pace() if config.steps_per_execution is None else None)


_BUILD_AFRESH = object()
"""What `_run` returns when the kept graph it was given cannot serve the call after all (`_Keeping.keeper`)."""


@dataclasses.dataclass(frozen=True)
class _Keeping:
    """How a train call may keep its graph: the kept graph it runs in (`warm`), or the one it built."""

    reuse: Any
    checkpoint: str | None
    """The checkpoint the call resumes from."""
    warm: Any = None
    model_hooks: list = dataclasses.field(default_factory=list)

    def keeper(self, parts, seed, hooks_added_state: bool):
        """The call's `Keeper`, None where the graph it built is not kept, or `_BUILD_AFRESH` where the kept graph
        cannot serve it (`call_plan.serve_after_begin`; the kept graph is then closed)."""
        if self.warm is None:
            if not kept_training.keepable(parts, self.model_hooks, seed, hooks_added_state):
                return None
            return kept_training.Keeper(self.reuse, parts, self.checkpoint)
        decision = call_plan.serve_after_begin(hooks_added_state)
        if not decision:
            logger.info("Building the training graph afresh: %s.", decision.reason)
            self.warm.close()
            return _BUILD_AFRESH
        return kept_training.Keeper(self.reuse, parts, self.checkpoint, warm=self.warm)


def _begin(hooks: list) -> bool:
    """Calls each hook's `begin`, in order, as a monitored session would before making its session: whether they
    added a variable, table or resource to the graph."""
    graph = tf.compat.v1.get_default_graph()
    before = effects.state_of(graph)
    for hook in hooks:
        hook.begin()
    return effects.state_of(graph) != before


def _run(estimator, parts: kept_graph.TrainingParts, plan, input_hooks: list, model_hooks: list, user_hooks: list,
         listeners: list, steps, max_steps, keeping: _Keeping | None):
    """Runs a training graph (the default one) in a monitored session with every hook, kept as `keeping` allows:
    the loss of the last step, or `_BUILD_AFRESH`."""
    model_dir, config, step, scaffold = estimator.model_dir, estimator.config, parts.step, parts.scaffold
    spec, strategy = parts.built.spec, config.train_distribute
    user_hooks = training_step.build_hooks(user_hooks, step)
    # Hooks that must see a (re-)created session before anything else, the checkpoint
    # saver's save-on-create included, say so with `runs_first = True`.
    first = [h for h in user_hooks if getattr(h, "runs_first", False)]
    all_hooks = first + input_hooks + _default_hooks(step, scaffold, config, model_dir, listeners, plan)
    if plan is None and (steps is not None or max_steps is not None):
        all_hooks.append(tf.compat.v1.train.StopAtStepHook(num_steps=steps, last_step=max_steps))
    all_hooks += [h for h in user_hooks if h not in first] + model_hooks
    if plan is not None:
        plan.watch(all_hooks)
    if config.cluster.is_distributed and config.num_ps_replicas:
        sessions.wait_for_tasks(config, "ps", config.session_creation_timeout_secs)
    stop_on_signal = interrupt.StopOnSignalHook()
    all_hooks.append(stop_on_signal)
    several_processes = replicas.in_several_processes(strategy)
    peers = peer_watch.PeerWatchHook(_peers(config)) if several_processes else None
    if peers is not None:
        all_hooks.append(peers)
    loss, ended, keeper = None, False, None
    try:
        hooks_added_state = _begin(all_hooks)
        keeper = keeping.keeper(parts, config.tf_random_seed, hooks_added_state) if keeping is not None else None
        if keeper is _BUILD_AFRESH:
            return _BUILD_AFRESH
        creator = sessions.training_session_creator(
            scaffold, config, model_dir,
            session_config=replicas.session_config(strategy, config.effective_session_config()),
            every_task_initializes=several_processes)
        if keeper is not None:
            creator = keeper.creator(creator)
        # Several processes: an aborted collective ends the session instead of re-creating it (the group
        # restarts from the newest checkpoint; a re-created session would wait on the collectives forever).
        with hooked_session.ReusingMonitoredSession(creator, all_hooks, should_recover=not several_processes,
                                                    hooks_begun=True) as session:
            while not session.should_stop():
                try:
                    _, loss = session.run([spec.train_op, spec.loss])
                except tf.errors.InvalidArgumentError as e:
                    if not training_step.is_withdrawn(e):
                        raise
                    if several_processes:
                        raise ClusterError(
                            f"{config.task_type} {config.task_id}: the shard service took back the shard of "
                            "this process's batch (it was silent too long, or the job rewound), and a replica "
                            "of a synchronous strategy cannot skip a step the others take. Start every worker "
                            f"again: each resumes from the newest checkpoint in {model_dir}.") from e
                    logger.info("The input withdrew a batch before its step wrote anything; going on with "
                                "the next.")
        ended = True
    except (tf.errors.CancelledError, tf.errors.UnavailableError, tf.errors.AbortedError) as e:
        if peers is None:
            raise
        gone = f"{peers.gone} stopped answering" if peers.gone is not None else \
            f"a worker of the all-reduce went away ({(e.message or '').splitlines()[0]})"
        raise ClusterError(
            f"{config.task_type} {config.task_id}: {gone}, and a step of a strategy over several processes "
            f"(MultiWorkerMirroredStrategy) needs every worker. Start every worker again: each resumes from "
            f"the newest checkpoint in {model_dir}.") from e
    finally:
        stop_on_signal.close()
        if keeper is not None and keeper is not _BUILD_AFRESH:  # kept for the next call where it ended well
            keeper.keep(ended and stop_on_signal.received is None)
        elif keeping is not None and keeping.warm is not None and keeper is None:
            keeping.warm.close()  # a kept graph whose call failed before its keeper was made
    stop_on_signal.deliver()  # Ctrl-C / SIGTERM: the checkpoint is saved; now stop as the signal asked
    log_lines.final_loss(loss)  # the numpy value the session returned, as 2.15 printed it
    return None if loss is None else float(loss)
