"""Reports through shared memory: a trainer on the service's machine writes each report into a ring the service
reads when it needs the book, so nothing waits for an acknowledgement.

A trainer on the service's machine names a file of its own in its report
line's hello (`ReportRing`, in /dev/shm); the service opens it (`RingReader`,
after checking it is a plain file of its own user, of the right size, named
like one, where such files live) and the trainer removes the name: each side
keeps it open, so it is gone with both processes, however they end, and what
the trainer wrote stays readable by the service after the trainer died.

A report written there is as good as counted: the service takes the ring's
reports into its book (`RingReader.drain`) before anything reads the book,
on every call any worker makes, before it seals the book for a checkpoint,
before it gives a silent or departed worker's shards back, as a line closes,
and a few times a second besides. So a report costs the trainer one small
write in its own memory: no message, no reply, no process woken per step.
Before the next training call, the host reads two words (`sealing`, `closed`)
and waits only where a seal is pending, or where the last report went
answered (a full or closed ring); in the call, the write gate is a few graph
ops on the batch's lease (`lease_check`), with no Python and no file read.

The bound is unchanged: a trainer writes a report after the step that trained
its batch, and the next step writes only once that report is in the ring, so
a trainer that dies has at most one trained batch unreported. A seal sets
SEALING in every other trainer's ring before it drains them; a step whose
host read the word just before it was set writes once more, and its report
misses the seal: the one batch a restore may replay, as with a report that
raced the seal over the line.

Layout, int64 words in native order, then the data sets' names, then the ring:
  DRAINED (service) how many reports the service has taken: the trainer writes
          report n only while n - DRAINED <= CAPACITY (else it reports answered)
  SEALING (service) nonzero while a seal holds this trainer's writes
  CLOSED  (service) nonzero once the service stopped reading the ring (its line
          closed): the trainer reports answered from then on
  NAMES   NAME_SLOTS slots of NAME_BYTES: a length byte and a data set's name
  entries CAPACITY entries of ENTRY_WORDS words: (number, name slot, shard id,
          lease, first record, records, check); the trainer writes an entry's
          number last, and `check` mixes all the others, so the service takes an
          entry only whole and only once

Each side writes only its own words and entries, each an aligned word written
whole.
"""

from __future__ import annotations

import logging
import mmap
import os
import re
import stat
import struct
import tempfile
import time
from typing import Callable


logger = logging.getLogger("elastimator")

RING_DIR = "/dev/shm"
"""Where rings live: memory, never a disk."""
PREFIX = "elastimator-reports-"
_NAME = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_]+")
DRAINED, SEALING, CLOSED = 0, 8, 16
"""Byte offsets of the header's words."""
NAMES, NAME_SLOTS, NAME_BYTES = 64, 4, 64
ENTRIES, ENTRY_WORDS, CAPACITY = NAMES + NAME_SLOTS * NAME_BYTES, 7, 128
SIZE = 8192
assert ENTRIES + CAPACITY * ENTRY_WORDS * 8 <= SIZE
NO_FLOOR = -2**63
"""The floor `lease_check` is given before the service has told one: every lease passes."""
_WORD = struct.Struct("=q")
_ENTRY = struct.Struct("=7q")
_BODY = struct.Struct("=6q")
_SALT = 0x5A17E1A571C0FFEE
_MASK = 2**64 - 1


def entry_check(number: int, slot: int, shard_id: int, lease: int, first: int, records: int) -> int:
    """The check word of an entry: its other words, each shifted apart, xor'ed with a salt (a signed 64-bit
    value). The number, written last, already makes a half-written entry unreadable; this catches a torn read
    anyway."""
    value = (number ^ (slot << 7) ^ (shard_id << 13) ^ (lease << 3) ^ (first << 19) ^ (records << 29) ^ _SALT) & _MASK
    return value - 2**64 if value >> 63 else value


class ReportRing:
    """A trainer's ring: named (`path`) until the service has opened it (`forget_path`), closed by `close`."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self._fd = fd
        self._map = mmap.mmap(fd, SIZE)
        self._written = 0
        self._slots: dict[str, int] = {}
        self.armed = False
        """Whether the last report went into the ring (False: it went answered, and the host waits for its reply
        before the next call)."""

    @classmethod
    def create(cls) -> "ReportRing | None":
        """A new ring, or None where this machine has no place for one (then reports take replies)."""
        if not os.path.isdir(RING_DIR):
            return None
        try:
            fd, path = tempfile.mkstemp(prefix=PREFIX, dir=RING_DIR)
            os.ftruncate(fd, SIZE)
        except OSError as e:
            logger.info("No report ring in %s (%s); reports wait for their replies.", RING_DIR, e)
            return None
        return cls(path, fd)

    def forget_path(self) -> None:
        """Removes the file's name (the service has opened it, or will not): the file lives while it is open."""
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def put(self, dataset: str, shard_id: int, lease: int, first: int, records: int) -> bool:
        """Writes one report; False where it must go answered: the ring is full or closed, or the data set's name
        does not fit (nothing written), or the service closed the ring as it was written (it may have read it:
        the book counts a report delivered twice once)."""
        slot = self._slot(dataset)
        number = self._written + 1
        if slot is None or self._word(CLOSED) or number - self._word(DRAINED) > CAPACITY:
            return False
        at = ENTRIES + (number % CAPACITY) * ENTRY_WORDS * 8
        _BODY.pack_into(self._map, at + 8, slot, shard_id, lease, first, records,
                        entry_check(number, slot, shard_id, lease, first, records))
        _WORD.pack_into(self._map, at, number)  # last: the entry is whole once its number is there
        self._written = number
        if self._word(CLOSED):  # closed while this was written: the service may never read it
            return False
        return True

    @property
    def sealing(self) -> bool:
        return bool(self._word(SEALING))

    @property
    def closed(self) -> bool:
        return bool(self._word(CLOSED)) or self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            self.forget_path()
            self._map.close()
            os.close(self._fd)
            self._fd = -1

    def _slot(self, dataset: str) -> int | None:
        slot = self._slots.get(dataset)
        if slot is None:
            name = dataset.encode("utf-8")
            if len(name) >= NAME_BYTES or len(self._slots) >= NAME_SLOTS:
                return None
            slot = len(self._slots)
            self._map[NAMES + slot * NAME_BYTES:NAMES + slot * NAME_BYTES + 1 + len(name)] = bytes([len(name)]) + name
            self._slots[dataset] = slot
        return slot

    def _word(self, offset: int) -> int:
        return _WORD.unpack_from(self._map, offset)[0] if self._fd >= 0 else 1


def lease_check(tag, floor, refused):
    """A graph check of a step's batch ([shard id, lease, first record, records]): True where its lease is
    current, i.e. of the service's run that `floor` (an int64 scalar: the newest lease floor the service told, or
    NO_FLOOR) is of, not below it, and not one of `refused` (int64 vector: leases the service refused that the
    floor does not cover). `ShardFeed.is_current` in graph ops."""
    import tensorflow as tf  # only a trainer builds the check; the service never imports TensorFlow for it

    with tf.name_scope("lease_check"):
        lease = tf.reshape(tag, [-1, 4])[:, 1]
        same_run = tf.equal(tf.bitwise.right_shift(lease, 32), tf.bitwise.right_shift(floor, 32))
        above = tf.logical_or(tf.equal(floor, NO_FLOOR), tf.logical_and(same_run, lease >= floor))
        taken_back = tf.reduce_any(tf.equal(lease[:, None], refused[None, :]), axis=1)
        return tf.reduce_all(tf.logical_and(above, tf.logical_not(taken_back)))


Count = Callable[[str, int, int, int, int], None]
"""Counts one report in the book: (data set, shard id, lease, first record, records)."""


class RingReader:
    """The service's end of a trainer's ring."""

    def __init__(self, fd: int):
        self._fd = fd
        self._map = mmap.mmap(fd, SIZE)
        self._drained = _WORD.unpack_from(self._map, DRAINED)[0]
        self._names: dict[int, str] = {}

    @classmethod
    def open(cls, path) -> "RingReader | None":
        """The ring a trainer named, or None (and a reply to every report) where it is not one: a plain file of
        this process's user, of SIZE bytes, named like one, in RING_DIR."""
        if not isinstance(path, str) or os.path.dirname(path) != RING_DIR or not _NAME.fullmatch(os.path.basename(path)):
            return None
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size != SIZE:
            os.close(fd)
            return None
        return cls(fd)

    def drain(self, count: Count) -> int:
        """Counts the reports written since the last drain, in order, with `count`; returns how many. A report
        `count` refuses (its lease taken back) is dropped: its records went back with the lease."""
        if self._fd < 0:
            return 0
        taken = 0
        while True:
            number = self._drained + 1
            at = ENTRIES + (number % CAPACITY) * ENTRY_WORDS * 8
            entry = _ENTRY.unpack_from(self._map, at)
            if entry[0] != number or entry[6] != entry_check(*entry[:6]):
                break  # not written yet (or being written)
            _, slot, shard_id, lease, first, records, _ = entry
            if 0 <= slot < NAME_SLOTS:
                count(self._name(slot), shard_id, lease, first, records)
            else:
                logger.warning("Report %d in a trainer's ring names data set slot %d of %d; dropped.", number, slot,
                               NAME_SLOTS)
            self._drained = number
            taken += 1
        if taken:
            _WORD.pack_into(self._map, DRAINED, self._drained)
        return taken

    def seal(self, sealing: bool) -> None:
        """Holds the trainer's writes (its gate goes to Python, which waits) while a seal waits for its commit."""
        if self._fd >= 0:
            _WORD.pack_into(self._map, SEALING, int(sealing))

    def close(self, count: Count) -> None:
        """Stops reading the ring: marks it closed, takes what it holds, and lets it go."""
        if self._fd >= 0:
            _WORD.pack_into(self._map, CLOSED, 1)
            self.drain(count)
            self._map.close()
            os.close(self._fd)
            self._fd = -1

    def _name(self, slot: int) -> str:
        name = self._names.get(slot)
        if name is None:
            at = NAMES + slot * NAME_BYTES
            name = self._map[at + 1:at + 1 + self._map[at]].decode("utf-8", errors="replace")
            self._names[slot] = name
        return name


def wait_unsealed(ring: ReportRing, heartbeat: Callable[[], None], poll_secs: float = 1e-3,
                  heartbeat_secs: float = 1.0) -> None:
    """Waits while a seal holds this trainer's writes; `heartbeat` (every `heartbeat_secs`) raises where the
    service is gone."""
    next_beat = time.monotonic() + heartbeat_secs
    while ring.sealing and not ring.closed:
        if time.monotonic() >= next_beat:
            heartbeat()
            next_beat = time.monotonic() + heartbeat_secs
        time.sleep(poll_secs)
