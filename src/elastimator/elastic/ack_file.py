"""Acknowledgements of a worker's reports through a small shared file, read by the training step itself.

A worker on the service's machine names a file of its own in its report line's
hello (`AckFile`, in /dev/shm). The service opens it (`AckWriter`, after
checking it is a plain file of its own user, of the right size, where such files
live), and the worker then removes its name: each side keeps it open, the step
reads it through the worker's descriptor, and it is gone with both processes,
however they end. For each report sent *quietly* (a packed frame that gets no
reply), the service writes the report's number there once the book has counted it. The next
training call's write gate reads the file with TensorFlow's own file op
(`fast_check`) and lets the writes go when the number there is the worker's
last report and the batch's lease is current: no Python inside the step, no
reply to read. Anything else (the report not yet handled, held back by a seal,
refused) takes the gate's Python check: it waits until the service has handled
the report (`wait_for`), and where the book did not count it, sends it again
as a call that is answered and waits, exactly as a report over the line always
did (the book counts a report delivered twice once). The chief, whose service
runs in its own process, counts each report as it is made and writes the
outcome to its ack file the same way.

Layout, int64 words in native order:
  ACKED  (written by the service) the number of the last quiet report counted
  AWAITED (written by the worker) the number of its last quiet report; DISARMED
         while its last report went another way, or no quiet report is out
  FLOOR  (written by the worker) the lease floor the gate checks the batch's
         lease against: the newest the service told, or DISARMED while a lease
         the service refused is not below it
  UNCOUNTED (written by the service) the number of the last quiet report the
         book did not count (held by a seal, or refused): the worker's Python
         check, which waits for one word or the other, sends it again answered

The worker writes its words between training calls only (and in the Python
check, after the step has read the file): of the words the step reads, only
ACKED may be written while it reads them. A read torn across that write mixes
the bytes of two numbers, and passes only where the number being written is the
one awaited or a later one: the worker has one quiet report out at a time, the
service counts it before writing its number, and it handles one connection's
frames in order, so a number being written while the gate reads is the awaited
report's.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import struct
import tempfile
import time

from elastimator.elastic.shards import ShardBook

logger = logging.getLogger("elastimator")

ACK_DIR = "/dev/shm"
"""Where ack files live: memory, never a disk."""
PREFIX = "elastimator-acks-"
_NAME = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_]+")
ACKED, AWAITED, FLOOR, UNCOUNTED = 0, 8, 16, 24
"""Byte offsets of the words."""
SIZE = 64
DISARMED = 2**63 - 1
"""An AWAITED no ACKED reaches, a FLOOR the gate takes for none."""
_WORD = struct.Struct("=q")


class AckFile:
    """A worker's ack file: named (`path`) until the service has opened it (`forget_path`), closed by `close`."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self._fd = fd
        self._read_path = f"/proc/self/fd/{fd}"
        """Where the step reads it: through this process's descriptor, with or without a name."""
        self._floor: int | None = None

    @classmethod
    def create(cls) -> "AckFile | None":
        """A new ack file, or None where this machine has no place for one (then reports take replies)."""
        if not (os.path.isdir(ACK_DIR) and os.path.isdir("/proc/self/fd")):
            return None
        try:
            fd, path = tempfile.mkstemp(prefix=PREFIX, dir=ACK_DIR)
        except OSError as e:
            logger.info("No ack file in %s (%s); reports wait for their replies.", ACK_DIR, e)
            return None
        os.pwrite(fd, bytes(SIZE), 0)
        ack_file = cls(path, fd)
        ack_file.disarm()
        ack_file._write(FLOOR, DISARMED)
        return ack_file

    def forget_path(self) -> None:
        """Removes the file's name (the service has opened it, or will not): the file lives while it is open."""
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def await_report(self, number: int) -> None:
        """The quiet report `number` went out: the next call's gate passes once the service counted it."""
        self._write(AWAITED, number)

    def wait_for(self, number: int, timeout_secs: float, poll_secs: float = 1e-4) -> bool:
        """Waits until the service has handled the quiet report `number`; whether the book counted it (False also
        where the service did not handle it within `timeout_secs`: the caller sends it again, answered)."""
        deadline = time.monotonic() + timeout_secs
        while True:
            acked, _, _, uncounted = struct.unpack("=4q", os.pread(self._fd, 32, 0))
            if acked >= number or uncounted >= number or time.monotonic() >= deadline:
                return acked >= number
            time.sleep(poll_secs)

    def disarm(self) -> None:
        """The last report went another way (or none is out): the next call's gate takes its Python check."""
        self._write(AWAITED, DISARMED)

    def set_floor(self, floor: int | None) -> None:
        """The lease floor the gate checks batches against; None while it cannot check them (Python does)."""
        floor = DISARMED if floor is None else floor
        if floor != self._floor:
            self._floor = floor
            self._write(FLOOR, floor)

    def fast_check(self, tag):
        """A graph check of a step's batch ([shard id, lease, first record, records]): True when the service has
        counted the worker's last report and the batch's lease is current. False says nothing: Python checks."""
        import tensorflow as tf  # only a trainer builds the check; the service never imports TensorFlow for it

        with tf.name_scope("ack_file"):
            # The session computes ops of constants alone once, as it optimizes the graph: a constant file name
            # would have the file read only then. The name takes an empty string made from the clock, an op that
            # is never computed ahead.
            nothing = tf.strings.substr(tf.strings.as_string(tf.timestamp()), 0, 0)
            words = tf.io.decode_raw(tf.io.read_file(tf.strings.join([self._read_path, nothing])), tf.int64)
            lease, floor = tf.reshape(tag, [-1, 4])[:, 1], words[FLOOR // 8]
            same_run = tf.equal(tf.bitwise.right_shift(lease, 32), tf.bitwise.right_shift(floor, 32))
            current = tf.logical_and(tf.reduce_all(tf.logical_and(same_run, lease >= floor)),
                                     tf.not_equal(floor, DISARMED))
            return tf.logical_and(words[ACKED // 8] >= words[AWAITED // 8], current)

    def close(self) -> None:
        if self._fd >= 0:
            self.forget_path()
            os.close(self._fd)
            self._fd = -1

    def _write(self, offset: int, value: int) -> None:
        if self._fd >= 0:
            os.pwrite(self._fd, _WORD.pack(value), offset)


def gate_floor(floor: int | None, abandoned) -> int | None:
    """The floor the gate may check leases against: the service's newest, while every lease the service refused
    lies below it (else None: Python checks each batch against the refused ones)."""
    if floor is None:
        return None
    if any(ShardBook.is_current(lease, floor) for lease in abandoned):
        return None
    return floor


class AckWriter:
    """The service's end of a worker's ack file."""

    def __init__(self, fd: int):
        self._fd = fd

    @classmethod
    def open(cls, path) -> "AckWriter | None":
        """The ack file a worker named, or None (and a reply to every report) where it is not one: a plain file of
        this process's user, of SIZE bytes, named like one, in ACK_DIR."""
        if not isinstance(path, str) or os.path.dirname(path) != ACK_DIR or not _NAME.fullmatch(os.path.basename(path)):
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

    def acknowledge(self, number: int) -> None:
        """The quiet report `number` is counted."""
        os.pwrite(self._fd, _WORD.pack(number), ACKED)

    def not_counted(self, number: int) -> None:
        """The quiet report `number` was not counted (a seal held it back, or the book refused it)."""
        os.pwrite(self._fd, _WORD.pack(number), UNCOUNTED)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
