"""The files the shard service keeps in a model_dir (its seals) and reads there (which checkpoint is newest),
without TensorFlow.

The standalone service (`elastimator shard-service`) holds a book of integers; TensorFlow would make it a
process of ~580 MB. A local model_dir is read and written with `os`; a model_dir on a file system only
TensorFlow reaches (gs://, hdfs://, s3://: a path with a scheme) through `tf.io.gfile`, imported then.

`newest_saved_step` is the step the service resumes from as it starts: the checkpoint the `checkpoint` state
file names, else the highest step whose index file is there (estimator/saving/checkpoints.py's order). It
does not read the checkpoints whole to see they are intact (that needs TensorFlow); the chief's restore hook
rewinds the book to the checkpoint the chief really restores before any shard is handed out.
"""

from __future__ import annotations

import os
import re
from typing import Any

_STEP = re.compile(r"-(\d+)$")
_NAMED = re.compile(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"\s*$')
"""The state file's line naming the checkpoint to restore (its `all_model_checkpoint_paths` lines list the rest)."""


def _gfile(path: str) -> Any:
    """tf.io.gfile where `path` names another file system (a scheme), else None."""
    if "://" not in path:
        return None
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  (only for gs://, hdfs://, ...)

    return tf.io.gfile


def exists(path: str) -> bool:
    gfile = _gfile(path)
    return gfile.exists(path) if gfile else os.path.exists(path)


def isdir(path: str) -> bool:
    gfile = _gfile(path)
    return gfile.isdir(path) if gfile else os.path.isdir(path)


def listdir(path: str) -> list[str]:
    gfile = _gfile(path)
    return [name.rstrip("/") for name in gfile.listdir(path)] if gfile else os.listdir(path)


def remove(path: str) -> None:
    gfile = _gfile(path)
    if gfile:
        gfile.remove(path)
    else:
        os.remove(path)


def read_text(path: str) -> str:
    gfile = _gfile(path)
    if gfile:
        with gfile.GFile(path) as f:
            return f.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_text_atomically(path: str, text: str) -> None:
    """Writes `text` to `path` through a temporary name and a rename: a reader sees the whole file or the old."""
    directory = os.path.dirname(path)
    gfile = _gfile(path)
    if gfile:
        gfile.makedirs(directory)
        with gfile.GFile(path + ".tmp", "w") as f:
            f.write(text)
        gfile.rename(path + ".tmp", path, overwrite=True)
        return
    os.makedirs(directory, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def newest_saved_step(model_dir: str) -> int | None:
    """The step of the checkpoint a job in `model_dir` resumes from (see the module doc), or None."""
    if not isdir(model_dir):
        return None
    names = listdir(model_dir)
    on_disk = {name[:-len(".index")] for name in names if name.endswith(".index")}
    named = _named_in_state_file(model_dir) if "checkpoint" in names else None
    if named is not None and os.path.basename(named) in on_disk and (step := _step(named)) is not None:
        return step
    steps = [step for name in on_disk if (step := _step(name)) is not None]
    return max(steps, default=None)


def _named_in_state_file(model_dir: str) -> str | None:
    """The checkpoint the state file names (its model_checkpoint_path), or None where it names none or is
    unreadable (then the files on disk decide, as they do for the chief)."""
    try:
        text = read_text(os.path.join(model_dir, "checkpoint"))
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if match := _NAMED.match(line.strip()):
            return match.group(1).encode().decode("unicode_escape")
    return None


def _step(prefix: str) -> int | None:
    match = _STEP.search(prefix)
    return int(match.group(1)) if match else None
