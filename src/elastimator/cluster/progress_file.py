"""A trainer's progress, in a small JSON file its supervisor reads (no TensorFlow here).

The launcher names the file in ELASTIMATOR_PROGRESS_FILE when it starts a
trainer; the trainer writes `{"step": ..., "time": ...}` after its first
session call and then every few seconds (`job.progress.ProgressFileHook`).
The launcher learns a process's first step from the file's appearance, not
from its log text, and (in a synchronous job) a trainer that stopped stepping from
the file's age: `stalled`. On Kubernetes the same check is each trainer pod's
liveness probe: `python -m elastimator.cluster.progress_file --stale-after SECS PATH`
exits 1 for a stalled trainer, and the kubelet restarts its container.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ENV = "ELASTIMATOR_PROGRESS_FILE"
STALL_SECS = 30.0
"""The default bound on a synchronous trainer's silence (the file is written every 5 s while it steps): past it the
launcher restarts the group, and a pod's liveness probe fails."""


def write(path: str, step: int, ended: bool = False) -> None:
    """Replaces the file atomically: a reader sees the old or the new content, never half of one. `ended`: the
    training is over (what the process does next is no step)."""
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w") as f:
        json.dump({"step": step, "time": time.time(), "ended": ended}, f)
    os.replace(temporary, path)


def stalled(path: str, after_secs: float, now: float | None = None) -> float | None:
    """Seconds since the trainer's last progress where that is more than `after_secs` and its training has not
    ended; None otherwise (progressing, ended, or not yet trained a step)."""
    progress = read(path)
    if not progress or progress.get("ended") or not isinstance(progress.get("time"), (int, float)):
        return None
    silent = (time.time() if now is None else now) - progress["time"]
    return silent if silent > after_secs else None


def read(path: str) -> dict | None:
    """The last progress written, or None when there is none yet."""
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def main(argv=None) -> int:
    """The liveness check: exit 1 when the trainer writing PATH has made no step for more than SECS seconds."""
    parser = argparse.ArgumentParser(prog="python -m elastimator.cluster.progress_file",
                                     description="Exit 1 if a trainer's progress file is older than --stale-after.")
    parser.add_argument("path")
    parser.add_argument("--stale-after", type=float, required=True, metavar="SECS")
    args = parser.parse_args(argv)
    silent = stalled(args.path, args.stale_after)
    if silent is not None:
        print(f"no training step for {silent:.0f} s (more than {args.stale_after:.0f}): stalled", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
