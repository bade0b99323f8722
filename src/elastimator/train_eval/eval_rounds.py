"""Evaluation rounds (evaluate, then run exporters) and the distributed evaluator loop."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import Callable

import tensorflow as tf

from elastimator.estimator import CheckpointDir, checkpoint_damage, global_step_of
from elastimator.train_eval import exporters
from elastimator.train_eval.policies import EvalRecord
from elastimator.train_eval.specs import EvalSpec

logger = logging.getLogger("elastimator")
DONE_MARKER = "train_done.json"


@dataclasses.dataclass(frozen=True)
class RoundResult:
    """One evaluation and what the exporters made of it."""

    step: int
    metrics: dict
    export_results: list
    final: bool


def evaluation_round(estimator, eval_spec: EvalSpec, checkpoint: str, final: bool) -> RoundResult:
    """Evaluates `checkpoint`, then runs every exporter on the result."""
    metrics = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=eval_spec.hooks,
                                 checkpoint_path=checkpoint, name=eval_spec.name)
    step = int(metrics["global_step"])
    return RoundResult(step, metrics, exporters.run_all(estimator, eval_spec.exporters, checkpoint, metrics, final), final)


@dataclasses.dataclass(frozen=True)
class EvalResult:
    """What a continuous-evaluation listener is told after a round (tf.estimator's `_EvalResult`)."""

    status: str
    metrics: dict | None = None
    checkpoint_path: str | None = None

    EVALUATED = "evaluated"
    MISSING_CHECKPOINT = "missing checkpoint"
    NO_NEW_CHECKPOINT = "no new checkpoint"


# --- training-done marker: the chief's word that no more checkpoints will come -----------------

def mark_training_done(model_dir: str, global_step: int, cluster: dict | None = None) -> None:
    """Written by the chief after its final checkpoint (write-then-rename), with the cluster it trained in (so that
    a chief restarted in that same cluster knows the training it belongs to is over)."""
    path = os.path.join(model_dir, DONE_MARKER)
    with tf.io.gfile.GFile(path + ".tmp", "w") as f:
        f.write(json.dumps({"global_step": global_step, "time": time.time(), "cluster": cluster}, sort_keys=True))
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def clear_training_done(model_dir: str) -> None:
    path = os.path.join(model_dir, DONE_MARKER)
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def training_done(model_dir: str) -> bool:
    return tf.io.gfile.exists(os.path.join(model_dir, DONE_MARKER))


def training_done_record(model_dir: str) -> dict | None:
    """What the chief wrote when training ended (global_step, time, cluster), or None."""
    try:
        with tf.io.gfile.GFile(os.path.join(model_dir, DONE_MARKER)) as f:
            record = json.loads(f.read())
    except (tf.errors.NotFoundError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def training_done_at(model_dir: str) -> float | None:
    """When the chief marked training done (wall time), or None: not marked, or a marker being replaced."""
    record = training_done_record(model_dir)
    try:
        return float(record["time"])
    except (KeyError, TypeError, ValueError):  # no record, or one without a time
        return None


def finalize(estimator, eval_spec: EvalSpec, last_round: RoundResult | None, checkpoint: str | None
             ) -> RoundResult | None:
    """Runs the final exports for a checkpoint that was evaluated before it was known to be the last."""
    if last_round is None or last_round.final:
        return last_round
    exports = exporters.run_all(estimator, eval_spec.exporters, checkpoint, last_round.metrics, final=True)
    return RoundResult(last_round.step, last_round.metrics, exports, True)


def snapshot(checkpoint: str, directory: str) -> str | None:
    """Hard-links (or copies) a checkpoint's files into `directory`; None if it was deleted meanwhile.

    The chief keeps deleting old checkpoints (keep_checkpoint_max); evaluating a
    private snapshot means a fast-moving job cannot pull the files away mid-evaluation.
    The snapshot is checked whole (`checkpoint_damage`) once made: the files are
    deleted one by one, so the glob may have caught the index without its data.
    """
    files = tf.io.gfile.glob(checkpoint + ".*")
    tf.io.gfile.makedirs(directory)
    target = os.path.join(directory, os.path.basename(checkpoint))
    try:
        for path in files:
            destination = os.path.join(directory, os.path.basename(path))
            try:
                os.link(path, destination)
            except OSError:
                tf.io.gfile.copy(path, destination, overwrite=True)
    except (OSError, tf.errors.NotFoundError):
        tf.io.gfile.rmtree(directory)
        return None
    if checkpoint_damage(target) is not None:
        tf.io.gfile.rmtree(directory)
        return None
    return target


def run_evaluator(estimator, eval_spec: EvalSpec, max_steps: int | None, *, poll_secs: float = 1.0,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                  listener=None) -> RoundResult | None:
    """Follows new checkpoints until training is over; returns the last round.

    Evaluates when the policy allows, and always evaluates the final checkpoint
    (the one at `max_steps`, or the newest once the chief marks training done),
    whatever the throttle, so the final model is never skipped. A `listener` (tf.estimator's
    `_ContinuousEvalListener`) is asked before each evaluation (`before_eval()`) and told after it
    (`after_eval(result)`, a `result` with `status`, `metrics` and `checkpoint_path`); either returning
    False ends the evaluation there.
    """
    model_dir = estimator.model_dir
    if eval_spec.start_delay_secs:
        logger.info("Evaluator: waiting %ss before the first evaluation.", eval_spec.start_delay_secs)
        sleep(eval_spec.start_delay_secs)
    last: EvalRecord | None = None
    last_round: RoundResult | None = None
    evaluated: str | None = None
    directory = CheckpointDir(model_dir)  # kept: it reads each checkpoint's index once, warns of damage once
    while True:
        done = training_done(model_dir)
        checkpoint = directory.newest()
        if checkpoint is None or checkpoint == evaluated:
            if done:
                return finalize(estimator, eval_spec, last_round, checkpoint)
            sleep(poll_secs)
            continue
        step = global_step_of(checkpoint)
        final = done or (max_steps is not None and step >= max_steps)
        if not final and not eval_spec.policy.should_evaluate(last, step, clock()):
            sleep(poll_secs)
            continue
        if listener is not None and not listener.before_eval():
            return last_round
        started = clock()
        private = snapshot(checkpoint, os.path.join(model_dir, "eval_snapshot"))
        if private is None:  # keep_checkpoint_max removed it before we could look: take the newest one
            logger.info("Evaluator: %s went away; moving to the newest checkpoint.", checkpoint)
            continue
        try:
            last_round = evaluation_round(estimator, eval_spec, private, final)
        finally:
            tf.io.gfile.rmtree(os.path.dirname(private))
        evaluated, last = checkpoint, EvalRecord(step, started)
        if final:
            return last_round
        if listener is not None and not listener.after_eval(EvalResult(EvalResult.EVALUATED, last_round.metrics,
                                                                       checkpoint)):
            return last_round
