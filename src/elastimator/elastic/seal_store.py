"""Committed seals on disk, next to the checkpoints they belong to.

`model_dir/shards/seal-<step>.json` holds the shard book as it was when
checkpoint <step> was written. Files are written to a temporary name and
renamed, so a reader sees a whole seal or none. A seal that cannot be read is
an error naming the file: the service refuses to start rather than silently
beginning again at epoch 0. No TensorFlow: the files go through elastic/model_dir_files.py.
"""

from __future__ import annotations

import json
import os
import re

from elastimator.elastic import model_dir_files as files
from elastimator.elastic.shards import ShardServiceError

_NAME = re.compile(r"^seal-(\d+)\.json$")


class SealStore:
    """Reads and writes committed seals under `<model_dir>/shards/`."""

    def __init__(self, model_dir: str, keep: int | None = 10):
        self.directory = os.path.join(model_dir, "shards")
        self.keep = keep

    def path(self, step: int) -> str:
        return os.path.join(self.directory, f"seal-{step}.json")

    def pending_path(self, step: int) -> str:
        return os.path.join(self.directory, f"seal-{step}.pending")

    def write_pending(self, step: int, state: dict) -> None:
        """Persists the seal taken right before checkpoint `step` is saved.

        If the process dies after the checkpoint is written but before the seal is
        committed, this file is that checkpoint's seal.
        """
        self._write(self.pending_path(step), step, state)

    def _write(self, path: str, step: int, state: dict) -> None:
        files.write_text_atomically(path, json.dumps({"checkpoint_step": step, "state": state}))

    def any_for(self, step: int) -> bool:
        """Whether any seal exists (elastic sharding was in use), or a pending one for `step`."""
        return bool(self.steps()) or files.exists(self.pending_path(step))

    def steps(self) -> list[int]:
        if not files.isdir(self.directory):
            return []
        return sorted(int(m.group(1)) for f in files.listdir(self.directory) if (m := _NAME.match(f)))

    def write(self, step: int, state: dict) -> str:
        """Persists the seal of checkpoint `step` atomically; keeps the newest `keep`."""
        path = self.path(step)
        self._write(path, step, state)
        if files.exists(self.pending_path(step)):
            files.remove(self.pending_path(step))
        if self.keep:
            for old in self.steps()[:-self.keep]:
                files.remove(self.path(old))
        return path

    def read(self, step: int) -> dict:
        """The state sealed with checkpoint `step`.

        Raises:
            ShardServiceError: when the file is missing or corrupted (named in the message).
        """
        path = self.path(step)
        if not files.exists(path) and files.exists(self.pending_path(step)):
            path = self.pending_path(step)  # the checkpoint was saved; its seal was not committed yet
        if not files.exists(path):
            raise ShardServiceError(
                f"no seal for checkpoint step {step} ({path} is missing); seals exist for steps {self.steps()}.")
        try:
            content = json.loads(files.read_text(path))
            if content.get("checkpoint_step") != step or not isinstance(content.get("state"), dict):
                raise ValueError("it does not hold a seal of this step")
            return content["state"]
        except (ValueError, UnicodeDecodeError, AttributeError) as e:
            raise ShardServiceError(
                f"seal file {path} is corrupted ({e}). Refusing to start from it: restore it, or remove the "
                "model_dir's shards/ directory to begin the data from epoch 0 on purpose."
            ) from None
