"""Evaluation results as the event files hold them: what BestExporter, early stopping, `inspect` and the
metrics chart read back."""

from __future__ import annotations

import glob
import logging

import tensorflow as tf

logger = logging.getLogger("elastimator")


def read_eval_events(pattern: str) -> dict[int, dict[str, float]]:
    """Scalar evaluation results by global step, from event files matching `pattern`."""
    results: dict[int, dict[str, float]] = {}
    for path in sorted(glob.glob(pattern)):
        try:
            for event in tf.compat.v1.train.summary_iterator(path):
                values = {v.tag: v.simple_value for v in event.summary.value if v.HasField("simple_value")}
                if values:
                    results.setdefault(event.step, {}).update(values)
        except tf.errors.DataLossError:
            logger.warning("Event file %s ends in a truncated record; using the records before it.", path)
    for step, values in results.items():
        values["global_step"] = step
    return results
