"""The evaluator's word, in the model_dir, that it has evaluated and exported the final checkpoint; and the chief
that waits for it where the job would otherwise end first.

A TFJob is Succeeded when its chief is (kubeflow/training-operator pkg/controller.v1/tensorflow/
tfjob_controller.go UpdateJobStatus), and `cleanPodPolicy: Running` then deletes the evaluator, which may not yet
have evaluated the final checkpoint, nor exported it. So `k8s manifest` gives a TFJob's chief WAIT_ENV where the
job has an evaluator, and the chief, its training done, waits (up to that many seconds) for the evaluator's
marker naming a step at least its final one. A JobSet's successPolicy waits for the evaluator itself, and the
local launcher waits for every task, so neither sets it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Callable

import tensorflow as tf

from elastimator.cluster import plan

logger = logging.getLogger("elastimator")

MARKER = "evaluator_done.json"
WAIT_ENV = plan.CHIEF_WAITS_FOR_EVALUATOR_ENV
"""Seconds the chief waits for the evaluator's final round (set by `k8s manifest` for a TFJob's chief)."""


def mark(model_dir: str, step: int | None) -> None:
    """Written by the evaluator once its final round (evaluation and exports) is over (write-then-rename)."""
    path = os.path.join(model_dir, MARKER)
    with tf.io.gfile.GFile(path + ".tmp", "w") as f:
        f.write(json.dumps({"step": step}))
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def evaluated_step(model_dir: str) -> int | None:
    try:
        with tf.io.gfile.GFile(os.path.join(model_dir, MARKER)) as f:
            return json.loads(f.read()).get("step")
    except (tf.errors.NotFoundError, ValueError):
        return None


def wait(model_dir: str, step: int, timeout_secs: float, *, poll_secs: float = 1.0,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Waits until the evaluator's marker names `step` or later; returns whether it did within `timeout_secs`."""
    deadline = clock() + timeout_secs
    logger.info("Chief: waiting up to %.0fs for the evaluator's final evaluation and export of step %d (%s), so "
                "that the job does not end before them.", timeout_secs, step, WAIT_ENV)
    while True:
        done = evaluated_step(model_dir)
        if done is not None and done >= step:
            logger.info("Chief: the evaluator has evaluated step %d.", done)
            return True
        if clock() >= deadline:
            logger.warning("Chief: the evaluator did not evaluate step %d within %.0fs (%s); the job ends without "
                           "it. Run `elastimator export` on the model_dir for the final model.", step, timeout_secs,
                           WAIT_ENV)
            return False
        sleep(poll_secs)
