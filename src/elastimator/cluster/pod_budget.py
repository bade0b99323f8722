"""The restart budget inside a Kubernetes pod: restarts count only while the job makes no progress.

A local job's launcher sees every exit and keeps each task's strikes (cluster/supervision.py). On Kubernetes the
controllers restart pods and count restarts over the job's whole life, so each pod keeps the count itself: where
the manifest sets ELASTIMATOR_MAX_STRIKES, `elastimator run` records each start of its task in the shared
model_dir (`<model_dir>/restarts/<task>.json`: the newest checkpoint's step at that start and the strikes so far).

* a start that finds no checkpoint newer than the previous start of the same task found is a strike; a newer
  one (`supervision.progressed`, the launcher's rule) takes the strikes back to 0, where the previous process
  of a chief or worker also trained a step (`mark_stepped`, as the launcher requires its progress file);
* a start with more than ELASTIMATOR_MAX_STRIKES strikes does not train: it exits at once with
  OUT_OF_RESTARTS_EXIT, which the restart policies of the manifests treat as permanent (cluster/k8s.py,
  jobset.py), so a crash loop ends the job after the budget, with its cause in the pod's log;
* records of another submission of the manifest (another job token) are not this job's: its first start counts
  from 0.

`next_start` is the rule, pure; `record_start` reads and writes the record (through tf.io.gfile, so the
model_dir may be on any filesystem TensorFlow reads).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Mapping

from elastimator.cluster.supervision import progressed
from elastimator.errors import ClusterError

ENV = "ELASTIMATOR_MAX_STRIKES"
"""Set by the manifests: the restarts a task may make with no progress between them."""
TOKEN_ENV = "ELASTIMATOR_JOB_TOKEN"
DIR = "restarts"


class OutOfRestarts(ClusterError):
    """A task started more times than its budget with no progress between them."""


@dataclasses.dataclass(frozen=True)
class StartRecord:
    """One task's latest start, as kept in the model_dir."""

    checkpoint_step: int | None
    """The newest checkpoint's step when it started (None: there was none)."""
    strikes: int
    """Its starts since the job last made progress (0: this start follows progress, or is the first)."""
    job: str
    """Which submission of the manifest it belongs to (a digest of the job token)."""
    stepped: bool = False
    """The process of this start trained a step (a chief's or worker's progress needs one)."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, value: Mapping) -> "StartRecord":
        step = value.get("checkpoint_step")
        return cls(None if step is None else int(step), int(value.get("strikes", 0)), str(value.get("job", "")),
                   bool(value.get("stepped", False)))


def next_start(previous: StartRecord | None, checkpoint_step: int | None, job: str,
               trainer: bool = False) -> StartRecord:
    """The record of a start that finds the checkpoint of `checkpoint_step`, after `previous` (see the module doc);
    `trainer`: the task is a chief or worker, whose progress needs a step of its own too."""
    if previous is None or previous.job != job or (progressed(previous.checkpoint_step, checkpoint_step)
                                                   and (previous.stepped or not trainer)):
        return StartRecord(checkpoint_step, 0, job)
    return StartRecord(checkpoint_step, previous.strikes + 1, job)


def over_budget(record: StartRecord, max_strikes: int) -> bool:
    """Whether this start is one restart too many: `max_strikes` restarts without progress happened already."""
    return record.strikes > max_strikes


def job_digest(environ: Mapping[str, str]) -> str:
    """A digest of this submission's job token (never the token itself, which is a secret)."""
    return hashlib.sha256(environ.get(TOKEN_ENV, "").encode()).hexdigest()[:16]


def max_strikes(environ: Mapping[str, str]) -> int | None:
    """The budget the manifest set, None where it set none."""
    value = environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        budget = int(value)
    except ValueError:
        budget = -1
    if budget < 0:
        raise ClusterError(f"{ENV} must be a whole number of restarts, 0 or more; got {value!r}. Write the manifest "
                           "again with `elastimator k8s manifest --max-restarts N`.")
    return budget


def mark_stepped(model_dir: str, task: str) -> None:
    """This start of `task` trained a step (its record says so, for the next start to count progress)."""
    path = record_path(model_dir, task)
    record = _read(path)
    if record is not None and not record.stepped:
        _write(path, dataclasses.replace(record, stepped=True))


def _read(path: str) -> StartRecord | None:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as f:
            return StartRecord.from_dict(json.load(f))
    except (ValueError, TypeError, AttributeError):
        return None  # a record cut short counts as none: a restart too many beats a job refused for it


def _write(path: str, record: StartRecord) -> None:
    """Written whole, then renamed over the old one, so that a reader never sees half a record."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path + ".tmp", "w") as f:
        f.write(json.dumps(record.to_dict()))
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def record_path(model_dir: str, task: str) -> str:
    return os.path.join(model_dir, DIR, f"{task}.json")


def record_start(model_dir: str, task: str, checkpoint_step: int | None, budget: int,
                 environ: Mapping[str, str] = os.environ) -> StartRecord:
    """Records this start of `task` and returns its record.

    Raises:
        OutOfRestarts: past the budget (the record is written first, so the next start is refused too).
    """
    path = record_path(model_dir, task)
    trainer = task.split("-")[0] in ("chief", "worker")
    record = next_start(_read(path), checkpoint_step, job_digest(environ), trainer)
    _write(path, record)
    if over_budget(record, budget):
        newest = "no checkpoint" if checkpoint_step is None else f"the checkpoint of step {checkpoint_step}"
        raise OutOfRestarts(
            f"{task} was restarted {record.strikes} time(s) with no progress between them (each start found "
            f"{newest}), more than its budget of {budget} ({ENV}); not training, so the job fails here instead of "
            f"restarting for ever. The cause is in the log of its previous run (kubectl logs --previous, or the "
            f"pod before this one). Fix it, then delete {path} (or write the manifest again with `elastimator k8s "
            f"manifest`: its new job token starts the count from 0).")
    return record
