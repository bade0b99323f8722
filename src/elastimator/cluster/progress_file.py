"""A trainer's progress, in a small JSON file its supervisor reads (no TensorFlow here).

The launcher names the file in ELASTIMATOR_PROGRESS_FILE when it starts a
trainer; the trainer writes `{"step": ..., "time": ...}` after its first
session call and then every few seconds (`job.progress.ProgressFileHook`).
The launcher learns a process's first step from the file's appearance, not
from its log text.
"""

from __future__ import annotations

import json
import os
import time

ENV = "ELASTIMATOR_PROGRESS_FILE"


def write(path: str, step: int) -> None:
    """Replaces the file atomically: a reader sees the old or the new content, never half of one."""
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w") as f:
        json.dump({"step": step, "time": time.time()}, f)
    os.replace(temporary, path)


def read(path: str) -> dict | None:
    """The last progress written, or None when there is none yet."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None
