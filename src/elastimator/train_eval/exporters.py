"""Exporters: which SavedModels `train_and_evaluate` writes after each evaluation.

Each exporter writes to `<model_dir>/export/<name>/<timestamp>/`, and records in the
export's `assets.extra/elastimator_origin.json` the global step it was made from, so
that no checkpoint is exported twice under one name (an evaluator restarted after
the final evaluation re-evaluates the newest checkpoint).
"""

from __future__ import annotations

import abc
import inspect
import json
import logging
import os
import shutil
import tempfile
from typing import Callable, Mapping

import tensorflow as tf

from elastimator.errors import ConfigError
from elastimator.train_eval.eval_events import read_eval_events

logger = logging.getLogger("elastimator")
ORIGIN_FILE = "elastimator_origin.json"


class Exporter(abc.ABC):
    """Writes a SavedModel (or decides not to) after an evaluation."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """Directory name under export/; unique within an EvalSpec."""

    @abc.abstractmethod
    def export(self, estimator, export_path: str, checkpoint_path: str, eval_result: Mapping,
               is_the_final_export: bool) -> bytes | None:
        """Exports `checkpoint_path` under `export_path`; returns the export directory or None."""


class _SavedModelExporter(Exporter):
    """Exports a SavedModel every time it is asked (tf.estimator 2.15's private base exporter, which frameworks
    such as EasyRec wrap); the public exporters below decide when."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable, assets_extra=None, as_text=False):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{type(self).__name__}: name must be a non-empty string; got {name!r}.")
        if not callable(serving_input_receiver_fn):
            raise ConfigError(
                f"{type(self).__name__} {name!r}: serving_input_receiver_fn must be callable; got "
                f"{type(serving_input_receiver_fn).__name__}."
            )
        self._name = name
        self._receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self) -> str:
        return self._name

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        del is_the_final_export
        return self._export(estimator, export_path, checkpoint_path, eval_result)

    def _export(self, estimator, export_path: str, checkpoint_path: str, eval_result: Mapping | None
                ) -> bytes | None:
        step = (eval_result or {}).get("global_step")
        if step is not None and int(step) in exported_steps(export_path):
            logger.info("%s already holds an export of global step %d; not exporting it again.", export_path,
                        int(step))
            return None
        with tempfile.TemporaryDirectory() as scratch:
            origin = os.path.join(scratch, ORIGIN_FILE)
            with open(origin, "w") as f:
                json.dump({"global_step": None if step is None else int(step),
                           "checkpoint": os.path.basename(checkpoint_path or "")}, f)
            return estimator.export_saved_model(
                export_path, self._receiver_fn, assets_extra={**(self._assets_extra or {}), ORIGIN_FILE: origin},
                as_text=self._as_text, checkpoint_path=checkpoint_path,
            )


def _check_keep(owner: str, exports_to_keep) -> None:
    if exports_to_keep is not None and (not isinstance(exports_to_keep, int) or exports_to_keep <= 0):
        raise ConfigError(f"{owner}: exports_to_keep must be a positive int or None; got {exports_to_keep!r}.")


def exports_in(export_path: str) -> list[str]:
    """Finished export directories under `export_path`, oldest first."""
    if not tf.io.gfile.isdir(export_path):
        return []
    stamps = [d for d in tf.io.gfile.listdir(export_path) if d.rstrip("/").isdigit()]
    return [os.path.join(export_path, d.rstrip("/")) for d in sorted(stamps, key=lambda d: int(d.rstrip("/")))]


def exported_steps(export_path: str) -> set[int]:
    """The global steps the exports under `export_path` were made from (as their origin files say)."""
    steps = set()
    for export in exports_in(export_path):
        try:
            with open(os.path.join(export, "assets.extra", ORIGIN_FILE)) as f:
                step = json.load(f).get("global_step")
        except (OSError, ValueError, AttributeError):
            continue  # exported by something else, or by an older elastimator
        if isinstance(step, int):
            steps.add(step)
    return steps


def garbage_collect(export_path: str, exports_to_keep: int | None) -> None:
    """Deletes all but the newest `exports_to_keep` exports."""
    if exports_to_keep is None:
        return
    for stale in exports_in(export_path)[:-exports_to_keep]:
        shutil.rmtree(stale, ignore_errors=True)


class FinalExporter(_SavedModelExporter):
    """Exports once, after the final evaluation."""

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if not is_the_final_export:
            return None
        return self._export(estimator, export_path, checkpoint_path, eval_result)


class LatestExporter(_SavedModelExporter):
    """Exports after every evaluation, keeping the newest `exports_to_keep`."""

    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False, exports_to_keep=5):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        _check_keep("LatestExporter", exports_to_keep)
        self._keep = exports_to_keep

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        path = self._export(estimator, export_path, checkpoint_path, eval_result)
        garbage_collect(export_path, self._keep)
        return path


def _loss_smaller(best_eval_result: Mapping, current_eval_result: Mapping) -> bool:
    """The default BestExporter comparison: lower "loss" is better."""
    for which, result in (("best_eval_result", best_eval_result), ("current_eval_result", current_eval_result)):
        if "loss" not in result:
            raise ConfigError(f"BestExporter compare_fn (lower loss is better): {which} has no 'loss' key "
                              f"(keys: {sorted(result)}).")
    return current_eval_result["loss"] < best_eval_result["loss"]


loss_smaller = _loss_smaller
"""BestExporter's default comparison, for confs to name (2.15 kept it private as `_loss_smaller`)."""


def _check_compare_fn(compare_fn) -> None:
    if not callable(compare_fn):
        raise ConfigError(f"BestExporter: compare_fn must be callable; got {type(compare_fn).__name__}.")
    try:
        params = inspect.signature(compare_fn).parameters
    except (TypeError, ValueError):
        return
    names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if sorted(names) != ["best_eval_result", "current_eval_result"]:
        raise ConfigError(
            "BestExporter: compare_fn must take exactly two arguments named best_eval_result and "
            f"current_eval_result, and return True when the current result is better; got arguments {names}."
        )


class BestExporter(_SavedModelExporter):
    """Exports when an evaluation beats the best one so far, keeping `exports_to_keep`.

    The best result so far is read from the evaluation event files
    (`event_file_pattern`, relative to model_dir) the first time it is needed,
    so it survives restarts. Unlike tf.estimator's, only evaluations *before*
    the current one count as "so far": the current evaluation's own events are
    never compared with themselves (which made tf.estimator skip exports after
    a restart, tensorflow#47396), and the first evaluation always exports when
    no export exists yet. An evaluation of global step 0 (the model before any
    training step, which a distributed evaluator meets when the job stops early)
    is never exported as the best, nor counted as the best so far.

    Args:
        compare_fn: `compare_fn(best_eval_result, current_eval_result) -> bool`,
            True when the current result is better. Defaults to lower loss.
    """

    def __init__(self, name="best_exporter", serving_input_receiver_fn=None,
                 event_file_pattern="eval/*.tfevents.*", compare_fn=_loss_smaller, assets_extra=None,
                 as_text=False, exports_to_keep=5):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        _check_compare_fn(compare_fn)
        _check_keep("BestExporter", exports_to_keep)
        self._compare = compare_fn
        self._pattern = event_file_pattern
        self._keep = exports_to_keep
        self._best: Mapping | None = None
        self._seeded = False

    def _seed(self, model_dir: str, current_step: int) -> None:
        self._seeded = True
        if not self._pattern:
            return
        earlier = {s: r for s, r in read_eval_events(os.path.join(model_dir, self._pattern)).items()
                   if 0 < s < current_step}
        for step in sorted(earlier):
            if self._best is None or self._compare(best_eval_result=self._best, current_eval_result=earlier[step]):
                self._best = earlier[step]
        if self._best is not None:
            logger.info("%s: the best evaluation before step %d (from events) is at step %s.", self.name,
                        current_step, self._best["global_step"])

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if eval_result.get("global_step") == 0:
            logger.info("%s: not exporting the evaluation of global step 0 as the best: it is the model before "
                        "any training step.", self.name)
            return None
        step = eval_result.get("global_step")
        if step is not None and int(step) in exported_steps(export_path):
            logger.info("%s already holds an export of global step %d; not exporting it again.", export_path,
                        int(step))  # (a rerun's re-evaluation of its last checkpoint: nothing to compare)
            return None
        if not self._seeded:
            self._seed(estimator.model_dir, int(eval_result.get("global_step", 0)))
        first = not exports_in(export_path)
        if not first and self._best is not None and not self._compare(
                best_eval_result=self._best, current_eval_result=eval_result):
            return None
        path = self._export(estimator, export_path, checkpoint_path, eval_result)
        self._best = dict(eval_result)
        garbage_collect(export_path, self._keep)
        return path


def export_dir(estimator, exporter) -> str:
    return os.path.join(estimator.model_dir, "export", exporter.name)


def run_all(estimator, exporters, checkpoint: str, metrics: dict, final: bool) -> list:
    """Runs each exporter on `checkpoint` (into `<model_dir>/export/<name>`); returns the paths they wrote."""
    results = []
    for exporter in exporters:
        path = exporter.export(estimator, export_dir(estimator, exporter), checkpoint, metrics, final)
        if path is not None:
            results.append(path)
    return results
