"""`Estimator.evaluate`: metrics over an input, written to eval/ events."""

from __future__ import annotations

import logging
import os
from typing import Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from elastimator._validate import is_int
from elastimator.errors import CheckpointError, ConfigError
from elastimator.estimator import log_lines
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import model_graph, replicas
from elastimator.estimator.loops import hooked_session, sessions, warm_graphs
from elastimator.estimator.loops import hooks as engine_hooks
from elastimator.estimator.saving import checkpoints
from elastimator.estimator.step import multi_batch

logger = logging.getLogger("elastimator")
GLOBAL_STEP_KEY = "global_step"


def eval_dir(model_dir: str, name: str | None) -> str:
    """Where evaluation events go: eval/ or eval_<name>/."""
    return os.path.join(model_dir, "eval" if not name else f"eval_{name}")


def write_eval_summaries(output_dir: str, step: int, results: Mapping[str, object],
                         checkpoint_path: str | None = None) -> None:
    """Writes each scalar result (and any serialized Summary) as an event at `step`, and the checkpoint evaluated
    as a text summary `checkpoint_path` (as tf.estimator did)."""
    summary = tf.compat.v1.Summary()
    if checkpoint_path is not None:
        value = summary.value.add(tag="checkpoint_path", tensor=tf.make_tensor_proto(checkpoint_path))
        value.metadata.plugin_data.plugin_name = "text"
    for key, value in results.items():
        if key == GLOBAL_STEP_KEY:
            continue
        if isinstance(value, bytes):
            try:
                summary.MergeFromString(value)
                continue
            except Exception:  # noqa: BLE001 - not a serialized Summary: a plain string metric
                logger.info("Metric %r is a string, not a Summary; not written to events.", key)
                continue
        array = np.asarray(value)
        if array.size == 1 and (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
            summary.value.add(tag=key, simple_value=float(array.reshape(())))
        else:
            logger.info("Metric %r has shape %s; only scalars are written to events.", key, array.shape)
    with tf.Graph().as_default():  # v1 FileWriters refuse eager mode
        writer = tf.compat.v1.summary.FileWriterCache.get(output_dir)
    writer.add_summary(summary, step)
    writer.flush()


def evaluate(
    estimator,
    input_fn: Callable,
    steps: int | None = None,
    hooks: Sequence | None = None,
    checkpoint_path: str | None = None,
    name: str | None = None,
) -> dict:
    """Evaluates the model on `input_fn` (until it ends, or for `steps` batches).

    Returns:
        A dict of metric name -> value (numpy scalars, as tf.estimator returned), with "loss" and
        "global_step". The values are also logged, through TensorFlow's logger as 2.15 logged them ("Saving
        dict for global step N: ...", `log_lines`) or else on elastimator's, and written as events to
        eval_dir(name).
    """
    if steps is not None and not is_int(steps, minimum=1):
        raise ConfigError(f"evaluate: steps must be a positive int or None; got {steps!r}.")
    user_hooks = engine_hooks.check_hooks("hooks", hooks)
    warm_graphs.rest_training(estimator)
    model_dir, config = estimator.model_dir, estimator.config
    checkpoint = checkpoints.resolve_for_reading(checkpoint_path, model_dir, "evaluating")
    reuse = warm_graphs.reuse_for(estimator, ModeKeys.EVAL, user_hooks, checkpoint)
    log = log_lines.EvaluationLog()
    warm = reuse.warm(input_fn, checkpoint, on_start=log.start) if reuse else None
    if warm is not None:
        results, batches = _evaluate_kept(reuse.graphs, warm, steps)
    else:
        results, batches = _evaluate_built(estimator, input_fn, steps, user_hooks, checkpoint, reuse, log)
    log.finish()
    step = int(results[GLOBAL_STEP_KEY])
    if log_lines.shown():  # 2.15's lines, for programs that read or grep them
        log_lines.saving_dict(step, results)
        if checkpoint is not None:
            log_lines.saving_checkpoint_path(step, checkpoint)
    else:  # what the command line shows
        shown = {k: v for k, v in sorted(results.items()) if not isinstance(v, bytes) and k != GLOBAL_STEP_KEY}
        logger.info("Evaluation at global step %d of %s over %d batches: %s", step, _describe(checkpoint, step),
                    batches, ", ".join(f"{k} = {_short(v)}" for k, v in shown.items()))
    write_eval_summaries(eval_dir(model_dir, name), step, results, checkpoint)
    return results  # numpy values, as tf.estimator returned them


def _evaluate_built(estimator, input_fn, steps, user_hooks, checkpoint, reuse,
                    log: log_lines.EvaluationLog) -> tuple[dict, int]:
    """Builds the evaluation graph and runs it: kept, in a session of its own, where the next call may reuse it
    (`warm_graphs`), else in a monitored session as 2.15 ran it."""
    config = estimator.config
    with tf.Graph().as_default() as graph:
        strategy = config.eval_distribute
        if replicas.replicas_of(strategy) > 1:
            built = replicas.build_for(estimator, ModeKeys.EVAL, input_fn, strategy)
        else:
            built = model_graph.build_for(estimator, ModeKeys.EVAL, input_fn)
        spec = built.spec
        # Over replicas, the loss metric is already among them (made in each replica).
        metrics = model_graph.metrics_with_loss(spec)
        eval_step = multi_batch.eval_step()
        update = multi_batch.counted((update for _, update in metrics.values()), eval_step)
        values = {key: value for key, (value, _) in metrics.items()}
        values[GLOBAL_STEP_KEY] = built.global_step
        scaffold = sessions.evaluation_scaffold(spec, config)
        fetches = {"batch": update, "results": (values, eval_step)}
        log.start()
        warm = reuse.keep(built, scaffold, checkpoint, config.evaluation_master, fetches,
                          spec.evaluation_hooks) if reuse else None
        if warm is not None:
            return _evaluate_kept(reuse.graphs, warm, steps)
        final, counted = tf.compat.v1.train.FinalOpsHook(values), tf.compat.v1.train.FinalOpsHook(eval_step)
        all_hooks = list(built.input_hooks) + user_hooks + list(spec.evaluation_hooks) + [final, counted]
        creator = sessions.restoring_session_creator(spec, config, checkpoint, config.evaluation_master,
                                                     scaffold=scaffold)
        loopable = built.replicas == 1 and all(multi_batch.allows_several_batches(hook) for hook in all_hooks)
        with hooked_session.ReusingMonitoredSession(creator, all_hooks) as session:

            def several():
                loop = multi_batch.build_in(graph, update) if loopable else None
                return None if loop is None else lambda size: session.run(loop.run, feed_dict={loop.size: size})

            multi_batch.run(lambda: session.run(update), several, 0, steps, session.should_stop)
        return dict(final.final_ops_values), int(counted.final_ops_values)


def _evaluate_kept(graphs, warm, steps: int | None) -> tuple[dict, int]:
    """Runs an evaluation in a kept graph (its input started, its checkpoint restored), then keeps it again."""
    served = warm.payload
    with graphs.in_use(warm):
        multi_batch.run(served.runs["batch"], lambda: served.several(lambda: _several(warm)), served.batches_run,
                        steps)
        results, batches = served.runs["results"]()
        served.ran(int(batches))
        return results, int(batches)


def _several(warm) -> Callable[[int], object] | None:
    """A call of several batches in the kept graph (None where its batch cannot be looped)."""
    loop = multi_batch.build_in(warm.graph, warm.payload.fetches["batch"])
    return None if loop is None else warm.session.make_callable(loop.run, feed_list=[loop.size])


def _describe(checkpoint: str | None, step: int) -> str:
    """The checkpoint evaluated; says so when its name's step differs from the global step it holds (under
    parameter-server training the workers go on stepping while the chief saves)."""
    if checkpoint is None:
        return "an initialized model"
    try:
        named = checkpoints.step_of_path(checkpoint)
    except CheckpointError:
        return checkpoint
    if named == step:
        return checkpoint
    return f"{checkpoint} (named for step {named}: workers trained on while the chief saved it)"


def _short(value):
    """A metric as our log line shows it: a float to 6 significant digits, anything else as it is."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return value.item() if isinstance(value, np.generic) else value
