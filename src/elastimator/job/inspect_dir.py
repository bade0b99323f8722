"""What a model_dir holds: checkpoints, the last evaluation, exports — as data and as text."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from typing import Mapping

import numpy as np
import tensorflow as tf

from elastimator.embedding.variable import ids_in_checkpoint
from elastimator.errors import ModelDirError
from elastimator.estimator import CheckpointDir
from elastimator.job import data_quality
from elastimator.train_eval.eval_events import read_eval_events
from elastimator.train_eval.exporters import exports_in


@dataclasses.dataclass(frozen=True)
class ModelDirSummary:
    model_dir: str
    checkpoints: list[tuple[int, str]]
    evaluations: dict[str, dict]
    """eval dir name -> the metrics of its newest evaluation."""
    exports: dict[str, list[str]]
    training_done: dict | None
    data_sets: dict[str, dict] = dataclasses.field(default_factory=dict)
    """Per data set, added up over processes: bad records skipped, empty fields filled (job/data_quality.py)."""
    embedding_ids: dict[str, int] = dataclasses.field(default_factory=dict)
    """Per embedding variable, the ids the latest checkpoint holds a row for."""


def inspect_model_dir(model_dir: str) -> ModelDirSummary:
    """Reads a model_dir without touching it.

    Raises:
        ModelDirError: when it does not exist or is not a directory.
    """
    if not tf.io.gfile.isdir(model_dir):
        raise ModelDirError(f"model_dir {model_dir!r} does not exist or is not a directory.")
    found = CheckpointDir(model_dir).on_disk()
    evaluations = {}
    for eval_dir in sorted(glob.glob(os.path.join(model_dir, "eval*"))):
        results = read_eval_events(os.path.join(eval_dir, "*.tfevents.*"))
        if results:
            evaluations[os.path.basename(eval_dir)] = results[max(results)]
    exports = {os.path.basename(d): exports_in(d) for d in sorted(glob.glob(os.path.join(model_dir, "export", "*")))}
    done_path = os.path.join(model_dir, "train_done.json")
    done = json.load(open(done_path)) if os.path.exists(done_path) else None
    ids = ids_in_checkpoint(found[-1][1]) if found else {}
    return ModelDirSummary(model_dir, found, evaluations, {k: v for k, v in exports.items() if v}, done,
                           data_quality.read(model_dir), ids)


def table(rows: list[tuple[str, str]]) -> str:
    """Two aligned columns."""
    if not rows:
        return ""
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, (float, np.floating)) else str(value)


def metrics_rows(metrics: Mapping) -> list[tuple[str, str]]:
    return [(k, _number(v)) for k, v in sorted(metrics.items()) if k != "global_step"]


def job_rows(summary: ModelDirSummary) -> list[tuple[str, str]]:
    """The end-of-job table for a model_dir that several processes wrote (what `launch` prints once)."""
    step = summary.checkpoints[-1][0] if summary.checkpoints else 0
    rows = [("model_dir", summary.model_dir), ("global step", str(step))]
    for name, metrics in summary.evaluations.items():
        rows.append((f"last evaluation ({name}/)", f"step {metrics.get('global_step')}"))
        rows += metrics_rows(metrics)
    rows += [(f"export ({name})", paths[-1]) for name, paths in summary.exports.items()]
    if not summary.exports:
        rows.append(("export", why_no_export(summary)))
    return rows + data_quality.rows(summary.data_sets)


def why_no_export(summary: ModelDirSummary) -> str:
    """The summary's line for a model_dir without an export: why there is none, and how to make one."""
    steps = sorted({int(m.get("global_step", -1)) for m in summary.evaluations.values()})
    if not steps:
        why = "no evaluation ran (the job stopped before one)"
    elif steps == [0]:
        why = ("the only evaluation was of step 0, the model before training (the job stopped before a trained "
               "checkpoint was evaluated), and step 0 is never exported as the best")
    else:
        why = "no exporter exported the evaluations (see the log)"
    return f"none: {why}; `elastimator export CONF --model-dir {summary.model_dir}` exports the newest checkpoint"


def render(summary: ModelDirSummary) -> str:
    lines = [f"model_dir: {summary.model_dir}"]
    if summary.checkpoints:
        steps = ", ".join(str(step) for step, _ in summary.checkpoints)
        lines += [f"checkpoints ({len(summary.checkpoints)}): steps {steps}",
                  f"latest checkpoint: {summary.checkpoints[-1][1]}"]
    else:
        lines.append("checkpoints: none")
    if summary.training_done:
        lines.append(f"training finished at step {summary.training_done['global_step']}")
    for name, metrics in summary.evaluations.items():
        lines.append(f"last evaluation ({name}/, step {metrics.get('global_step')}):")
        lines.append(table(metrics_rows(metrics)))
    if not summary.evaluations:
        lines.append("evaluations: none")
    for name, paths in summary.exports.items():
        lines.append(f"exports '{name}' ({len(paths)}): newest {paths[-1]}")
    if not summary.exports:
        lines.append("exports: none")
    if summary.embedding_ids:
        lines.append("embedding variables (ids with a row, latest checkpoint):")
        lines.append(table([(name, str(n)) for name, n in sorted(summary.embedding_ids.items())]))
    if summary.data_sets:
        lines.append("data (all processes, last run of each):")
        lines.append(table(data_quality.rows(summary.data_sets)))
    return "\n".join(lines)
