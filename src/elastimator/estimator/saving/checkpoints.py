"""Checkpoints in a model_dir: finding, validating, reading and writing them.

`CheckpointDir` is what the engine and everything above it ask which checkpoint ("where do I resume?", "which
step is saved?", "is this the checkpoint I restored?"); the functions below it are its parts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import time

import tensorflow as tf

from elastimator.errors import CheckpointError, ModelDirError
from elastimator.estimator.saving import graph_defs

logger = logging.getLogger("elastimator")
CHECKPOINT_PREFIX = "model.ckpt"


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where training resumes: the newest intact checkpoint (None: from scratch) and the global step it holds."""

    checkpoint: str | None
    step: int


@dataclasses.dataclass(eq=False)
class CheckpointDir:
    """The checkpoints of one model_dir.

    An instance remembers what it found: whether each checkpoint reads whole (read from its index once while its
    files are unchanged) and which damaged ones it warned of (once each). Keep one to poll a model_dir (the
    evaluator's loop, a Predictor's reload).
    """

    path: str
    _verdicts: dict[str, tuple[tuple, str | None]] = dataclasses.field(default_factory=dict, repr=False)
    """prefix -> (the sizes and times of its files, what `damage` found)."""
    _reported: set[str] = dataclasses.field(default_factory=set, repr=False)
    """Damaged checkpoints already warned about."""

    def newest(self) -> str | None:
        """The checkpoint to restore: the one the `checkpoint` state file names, or None.

        As tf.estimator did, the state file decides, not the highest step on disk: a user who rolls a model back
        by pointing `checkpoint` at an older prefix, or a framework that names a prefix of its own (AdaNet's
        `increment.ckpt-N`), gets that checkpoint. Only when it does not read whole (a truncated `.data` file, a
        missing `.index`, from a full disk or a copy cut short) is it skipped, with a warning that says why, for
        the newest intact one; an unreadable or missing state file is bypassed by looking at the checkpoint
        files themselves.
        """
        if not tf.io.gfile.isdir(self.path):
            return None
        for prefix in _candidates(self.path, self._reported):
            problem = self.damage(prefix)
            if problem is None:
                return prefix
            if prefix not in self._reported:
                self._reported.add(prefix)
                logger.warning("Skipping checkpoint %s: %s. Using the newest one before it that reads whole.",
                               prefix, problem)
        return None

    def damage(self, prefix: str) -> str | None:
        """`damage(prefix)`, read once while the checkpoint's files are unchanged."""
        signature = _signature(prefix)
        if isinstance(signature, str):
            return signature
        cached = self._verdicts.get(prefix)
        if cached is not None and cached[0] == signature:
            return cached[1]
        verdict = _read_index_and_sizes(prefix)
        self._verdicts[prefix] = (signature, verdict)
        return verdict

    @staticmethod
    def stamp(prefix: str) -> tuple:
        """A checkpoint's path with its index file's size and modification time: a checkpoint written again under
        the same name (a model_dir trained anew) stamps differently; one that is not a local file (gs://) never
        stamps the same twice."""
        try:
            stat = os.stat(prefix + ".index")
        except OSError:
            return (prefix, object())
        return (prefix, stat.st_size, stat.st_mtime_ns)

    def resume_point(self) -> ResumePoint:
        """The newest intact checkpoint and the global step stored in it (0 with none)."""
        newest = self.newest()
        return ResumePoint(newest, global_step_of(newest))

    def newest_step(self) -> int:
        """The global step stored in the newest intact checkpoint (0 with none)."""
        return self.resume_point().step

    def newest_saved_step(self) -> int | None:
        """The step the newest intact checkpoint is named after (what the saver was told: the step a shard seal
        was committed under), or None with no checkpoint."""
        newest = self.newest()
        return None if newest is None else _step_or_none(newest)

    def all(self) -> list[str]:
        """Every checkpoint prefix, oldest first."""
        return all_checkpoints(self.path, self._reported)

    def on_disk(self) -> list[tuple[int, str]]:
        """(global step, prefix) of each checkpoint whose files are there, oldest first."""
        return [(global_step_of(prefix), prefix) for prefix in self.all() if exists(prefix)]

    def repair(self) -> None:
        """Chief, before training: moves an unreadable `checkpoint` state file aside and rewrites it."""
        if tf.io.gfile.isdir(self.path):
            repair_state_file(self.path)


def check_model_dir(model_dir: str) -> str:
    """Returns `model_dir`, raising if it exists but is not a directory."""
    if tf.io.gfile.exists(model_dir) and not tf.io.gfile.isdir(model_dir):
        raise ModelDirError(
            f"model_dir {model_dir!r} exists and is a file; expected a directory for checkpoints and "
            "events. Pass a directory path (a new one is created), or move the file away."
        )
    return model_dir


def repair_state_file(model_dir: str) -> None:
    """Chief, before training: an unreadable `checkpoint` state file is moved aside (kept, not deleted) and
    rewritten from the checkpoints on disk, so the saver can resume its bookkeeping."""
    path = os.path.join(model_dir, "checkpoint")
    try:
        tf.train.get_checkpoint_state(model_dir)
        return
    except Exception:  # pylint: disable=broad-except  # as in _candidates
        pass
    intact = [p for p in _candidates(model_dir) if damage(p) is None][::-1]
    kept = f"{path}.unreadable-{int(time.time())}"
    tf.io.gfile.rename(path, kept, overwrite=True)
    if intact:
        tf.compat.v1.train.update_checkpoint_state(
            model_dir, os.path.basename(intact[-1]), [os.path.basename(p) for p in intact])
    logger.warning("Rewrote %s from the checkpoints on disk (%d intact); the unreadable one is kept as %s.", path,
                   len(intact), kept)


def _candidates(model_dir: str, reported: set[str] | None = None) -> list[str]:
    """Checkpoint prefixes to restore, in order of preference: the one the state file names, then those it
    lists and those whose files are on disk, newest first. An unreadable state file is warned of once per
    `reported` (a `CheckpointDir`'s)."""
    reported = set() if reported is None else reported
    named: list[str] = []
    listed: list[str] = []
    try:
        state = tf.train.get_checkpoint_state(model_dir)
        if state is not None:
            # TensorFlow has already joined relative entries with model_dir.
            listed = [*state.all_model_checkpoint_paths, state.model_checkpoint_path]
            named = [state.model_checkpoint_path] if state.model_checkpoint_path else []
    except Exception as e:  # pylint: disable=broad-except  # UnicodeDecodeError, text_format.ParseError, OpError
        if model_dir not in reported:
            reported.add(model_dir)
            logger.warning("The checkpoint state file %s is unreadable (%s: %s); looking for checkpoint files "
                           "instead.", os.path.join(model_dir, "checkpoint"), type(e).__name__, str(e)[:200])
    on_disk = [path[:-len(".index")] for path in tf.io.gfile.glob(os.path.join(model_dir, "*.index"))]
    on_disk += [path[:-len(".meta")] for path in tf.io.gfile.glob(os.path.join(model_dir, "*.meta"))]
    by_name: dict[str, str] = {}
    for prefix in listed + on_disk:  # one entry per checkpoint, however its directory was spelled
        if _step_or_none(prefix) is not None:
            by_name.setdefault(os.path.basename(prefix), prefix)
    for prefix in named:
        by_name.pop(os.path.basename(prefix), None)
    return named + sorted(by_name.values(), key=_step_or_none, reverse=True)


def _step_then_unnumbered(prefix: str) -> int:
    """A sort key, oldest first: the step in the name, a prefix without one (what a state file may name) first."""
    step = _step_or_none(prefix)
    return -1 if step is None else step


def _step_or_none(prefix: str) -> int | None:
    try:
        return step_of_path(prefix)
    except CheckpointError:
        return None


def damage(prefix: str) -> str | None:
    """Why the checkpoint `prefix` cannot be restored whole, or None when it can.

    Reads the index (not the values): every variable must have its `.data` shard, and
    the shards must hold at least the bytes the fixed-size variables need.
    """
    signature = _signature(prefix)
    return signature if isinstance(signature, str) else _read_index_and_sizes(prefix)


def _signature(prefix: str) -> tuple | str:
    """The sizes and modification times of a checkpoint's files, or why there are none to read."""
    if not tf.io.gfile.exists(prefix + ".index"):
        return f"its index file {os.path.basename(prefix)}.index is missing"
    files = [prefix + ".index", *tf.io.gfile.glob(prefix + ".data-*")]
    try:
        stats = [tf.io.gfile.stat(path) for path in files]
    except tf.errors.NotFoundError:  # keep_checkpoint_max deleted it between the glob and the stat
        return "its files went away while being looked at"
    return tuple((path, st.length, st.mtime_nsec) for path, st in zip(files, stats))


_SHARD_COUNT = re.compile(r"\.data-\d+-of-(\d+)$")
"""A data shard's name ends with its number and how many the checkpoint has: model.ckpt-5.data-00000-of-00002."""


def _read_index_and_sizes(prefix: str) -> str | None:
    try:
        reader = tf.train.load_checkpoint(prefix)
        shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    except (tf.errors.OpError, ValueError) as e:
        return f"its index cannot be read ({str(e).splitlines()[0][:200]})"
    shards = tf.io.gfile.glob(prefix + ".data-*")
    if not shards:
        return "it has no .data file"
    named = _SHARD_COUNT.search(shards[0])
    if named and len(shards) != int(named.group(1)):  # keep_checkpoint_max deletes the shards one by one
        return f"it has {len(shards)} of its {int(named.group(1))} .data files"
    expected = sum(dtypes[name].size * _elements(shape) for name, shape in shapes.items()
                   if dtypes[name] != tf.string)
    held = sum(tf.io.gfile.stat(path).length for path in shards)
    if held < expected:
        return f"its .data holds {held} bytes, fewer than the {expected} its variables need (truncated)"
    return None


def _elements(shape) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def exists(prefix: str) -> bool:
    """Whether a V2 checkpoint with this prefix is on disk."""
    return tf.io.gfile.exists(prefix + ".index")


def resolve(checkpoint_path: str | None, model_dir: str) -> str | None:
    """The checkpoint to read: `checkpoint_path` (a prefix or a directory) or the newest in model_dir.

    Raises:
        CheckpointError: when `checkpoint_path` was given but names no checkpoint.
    """
    if checkpoint_path is None:
        return CheckpointDir(model_dir).newest()
    if tf.io.gfile.isdir(checkpoint_path):
        found = tf.train.latest_checkpoint(checkpoint_path)
        if found is None:
            raise CheckpointError(
                f"checkpoint_path {checkpoint_path!r} is a directory with no checkpoint in it. "
                "Pass a checkpoint prefix such as <model_dir>/model.ckpt-1000, or train first."
            )
        return found
    if not exists(checkpoint_path):
        available = all_checkpoints(model_dir)
        hint = f"Checkpoints in {model_dir!r}: {available}." if available else f"{model_dir!r} has no checkpoints."
        raise CheckpointError(
            f"checkpoint_path {checkpoint_path!r} does not exist (no {checkpoint_path}.index). "
            f"Expected a checkpoint prefix like <model_dir>/model.ckpt-<step>. {hint}"
        )
    return checkpoint_path


def resolve_for_reading(checkpoint_path: str | None, model_dir: str, purpose: str) -> str | None:
    """Like `resolve`, logging that an initialized model is used when model_dir has no checkpoint."""
    checkpoint = resolve(checkpoint_path, model_dir)
    if checkpoint is None:
        logger.warning("No checkpoint in %s: %s with a freshly initialized model.", model_dir, purpose)
    return checkpoint


def all_checkpoints(model_dir: str, reported: set[str] | None = None) -> list[str]:
    """All checkpoint prefixes in model_dir (listed by its state file, or found on disk), oldest first."""
    if not tf.io.gfile.isdir(model_dir):
        return []
    return sorted(_candidates(model_dir, reported), key=_step_then_unnumbered)


def global_step_of(checkpoint: str | None) -> int:
    """The global step stored in a checkpoint (0 for none)."""
    if checkpoint is None:
        return 0
    try:
        return int(tf.train.load_variable(checkpoint, tf.compat.v1.GraphKeys.GLOBAL_STEP))
    except (tf.errors.NotFoundError, ValueError):
        return 0


def step_of_path(checkpoint: str) -> int:
    """The step in a checkpoint's file name (model.ckpt-<step>), which is what the saver was told."""
    try:
        return int(checkpoint.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        raise CheckpointError(f"{checkpoint!r} is not named <prefix>-<step>.") from None


def recall_saved(saver: tf.compat.v1.train.Saver, model_dir: str) -> None:
    """Tells `saver`, which a session just restored with, the checkpoints model_dir's state file lists (those still
    on disk, with their times), as TensorFlow's SessionManager told a saver restoring from a directory in
    tf.estimator's training: its keep_checkpoint_max then counts an earlier call's or process's checkpoints and
    deletes the oldest, and its state file keeps listing them, instead of starting from none."""
    state = tf.train.get_checkpoint_state(model_dir)
    saved = []
    for prefix in state.all_model_checkpoint_paths if state is not None else []:
        try:
            saved.append((prefix, tf.io.gfile.stat(prefix + ".index").mtime_nsec / 1e9))
        except tf.errors.NotFoundError:  # deleted meanwhile, or never whole: not the saver's to count
            continue
    saver.set_last_checkpoints_with_time(saved)


def make_saver(config) -> tf.compat.v1.train.Saver:
    """The Saver every Estimator graph uses: relative paths, retention from RunConfig, and a finalized graph's
    meta graph made from its one GraphDef (`graph_defs`)."""
    return graph_defs.Saver(
        sharded=True,
        max_to_keep=config.keep_checkpoint_max or None,
        keep_checkpoint_every_n_hours=config.keep_checkpoint_every_n_hours,
        defer_build=True,
        save_relative_paths=True,
    )


def checkpoint_path(model_dir: str) -> str:
    return os.path.join(model_dir, CHECKPOINT_PREFIX)
