"""DLRover's trainer entry command, run by elastimator.

A DLRover job's pods run

    python -m dlrover.trainer.entry.local_entry --platform=Kubernetes --conf=train_conf.TrainConf \\
        --enable_auto_scaling=True

and its local runs `python -m dlrover.trainer --platform=local_kubernetes --conf=... --ps_num=1 --worker_num=2`.
Put `elastimator.compat` in front and the same command runs on elastimator:

    python -m elastimator.compat -m dlrover.trainer.entry.local_entry --platform=Kubernetes --conf=...

This never installs anything named `dlrover`: where DLRover is installed, `python -m dlrover...` still runs it.
The flags keep their meaning (`plan` turns them into elastimator's command line):

* `--platform=Kubernetes` (DLRover's default): this process is one task of a cluster its TF_CONFIG describes:
  `elastimator run CONF`. `--task_type` / `--task_id` set the task TF_CONFIG names, as DLRover's did.
* `--platform=local` or `local_kubernetes`: the whole job on this machine, as DLRover's process scheduler
  started it: `elastimator launch CONF --ps PS_NUM --workers WORKER_NUM-1 [--evaluator]`. DLRover's worker 0 was
  its chief, so `--worker_num` counts the chief.
* `--conf=module.Class`: the conf, imported from the current directory, as DLRover imported it.
* `--enable_auto_scaling`: `launch --autoscale` locally (on Kubernetes the job's manifest decides). DLRover parsed
  it with `type=bool`, so `--enable_auto_scaling=False` meant True there; here False means False.
* Other flags (`--worker_action`, `--mock`, ...) have no counterpart and are named in one line, not dropped
  silently.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Sequence

from elastimator import cli
from elastimator.compat.dlrover import ENTRY_MODULES
from elastimator.errors import USAGE_EXIT, ConfError

__all__ = ["ENTRY_MODULES", "main", "plan"]

logger = logging.getLogger("elastimator")


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False; got {text!r}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m elastimator.compat -m dlrover.trainer.entry.local_entry",
                                     allow_abbrev=False)
    parser.add_argument("--platform", type=str.upper, default="KUBERNETES")
    parser.add_argument("--conf", required=True, help="the conf, module.Class, as DLRover took it")
    parser.add_argument("--ps_num", type=int, default=1)
    parser.add_argument("--worker_num", type=int, default=3)
    parser.add_argument("--evaluator_num", type=int, default=1)
    parser.add_argument("--enable_auto_scaling", type=_flag, nargs="?", const=True, default=False)
    parser.add_argument("--task_type")
    parser.add_argument("--task_id", type=int)
    return parser


def plan(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """elastimator's command line for DLRover's entry arguments, and the arguments that have no counterpart.

    Raises:
        ConfError: for a platform elastimator does not run, or counts out of range.
    """
    args, unknown = _parser().parse_known_args(list(argv))
    if args.platform == "KUBERNETES":
        return ["run", args.conf, "--no-progress"], unknown
    if args.platform not in ("LOCAL", "LOCAL_KUBERNETES"):
        raise ConfError(f"--platform={args.platform.lower()}: elastimator runs DLRover's 'Kubernetes' (one task of a "
                        "cluster) and 'local' / 'local_kubernetes' (the whole job on this machine) platforms. For "
                        "Ray, run the conf with `elastimator launch` or on Kubernetes.")
    if args.worker_num < 1:
        raise ConfError(f"--worker_num={args.worker_num}: DLRover's worker 0 is the chief, so a job needs 1 or more.")
    command = ["launch", args.conf, "--ps", str(args.ps_num), "--workers", str(args.worker_num - 1)]
    if args.evaluator_num:
        command.append("--evaluator")
    if args.enable_auto_scaling:
        command.append("--autoscale")
    return command, unknown


def main(argv: Sequence[str]) -> int:
    """Runs DLRover's entry command on elastimator; returns the exit code."""
    try:
        command, unknown = plan(argv)
    except ConfError as e:
        print(f"elastimator: error: {e}", file=sys.stderr)
        return USAGE_EXIT
    if unknown:
        print(f"elastimator: DLRover arguments with no counterpart here, not used: {' '.join(unknown)}", flush=True)
    task = _parser().parse_known_args(list(argv))[0]
    if task.task_type is not None or task.task_id is not None:
        _set_task(task.task_type, task.task_id)
    return cli.main(command)


def _set_task(task_type: str | None, task_id: int | None) -> None:
    """The task TF_CONFIG names, as DLRover's --task_type / --task_id set it for its process."""
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = dict(tf_config.get("task", {}))
    if task_type is not None:
        task["type"] = task_type
    if task_id is not None:
        task["index"] = task_id
    os.environ["TF_CONFIG"] = json.dumps(dict(tf_config, task=task))


if __name__ == "__main__":  # run by `python -m elastimator.compat -m dlrover.trainer...` (compat/__main__.py)
    sys.exit(main(sys.argv[1:]))
