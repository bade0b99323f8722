"""A private network for a local job: its TensorFlow servers unreachable from any other host.

`tf.distribute.Server` listens on every interface (0.0.0.0), whatever address
the cluster names, and its gRPC endpoints run graph ops and read or overwrite
variables for anyone who connects. A job `launch` runs on one machine only
needs loopback, so the launcher starts its processes in a network namespace of
their own that has nothing but loopback: they reach each other, and nothing
outside the namespace reaches them (nor, for the same reason, do they reach
other hosts).

Linux namespaces belong to a thread: `private_network()` moves the calling
thread into a new namespace, so the processes it starts (and its own
connections) are inside; on exit the thread goes back. It needs CAP_SYS_ADMIN
(root, or root in a user namespace: `elastimator launch` re-runs itself under
`unshare --user --map-root-user` for a user without it).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import socket
import struct
from typing import Iterator

from elastimator.errors import ClusterError

logger = logging.getLogger("elastimator")

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
MODES = ("private", "auto", "host")
"""private: a private network or an error; auto: private where this machine allows it, else a warning; host: the
machine's own network (for jobs that read data from other hosts), with the servers on every interface."""
EXPOSED = ("TensorFlow's servers listen on every interface of this machine: anyone who reaches it can run graph "
           "ops on them and read or overwrite the model's variables.")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _loopback_up() -> None:
    """Brings `lo` up in the current namespace (a new one starts with it down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))


def _enter_new_namespace() -> int:
    """Moves this thread into a new network namespace with loopback up; returns a descriptor of the old one.

    Raises:
        OSError: when the kernel refuses (no CAP_SYS_ADMIN, namespaces disabled).
    """
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    libc = _libc()
    if libc.unshare(_CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        os.close(original)
        raise OSError(error, os.strerror(error))
    try:
        _loopback_up()
    except OSError:
        _leave(original)
        raise
    return original


def _leave(original: int) -> None:
    """Returns this thread to the namespace it came from. As root of a user namespace (the CLI's case, which
    exits next) the kernel does not allow it, and the thread stays in the private one."""
    try:
        if _libc().setns(original, _CLONE_NEWNET) != 0:
            logger.debug("Staying in the job's network namespace: %s.", os.strerror(ctypes.get_errno()))
    finally:
        os.close(original)


@contextlib.contextmanager
def private_network(mode: str = "auto") -> Iterator[str]:
    """Runs the body (and every process it starts) in a network namespace with only loopback.

    Yields:
        One line saying what holds, for the launcher to print.

    Raises:
        ClusterError: in mode "private" when the namespace cannot be made.
    """
    if mode not in MODES:
        raise ClusterError(f"--network must be one of {', '.join(MODES)}; got {mode!r}.")
    if mode == "host":
        yield f"network: the machine's own (--network host). {EXPOSED}"
        return
    try:
        original = _enter_new_namespace()
    except OSError as e:
        why = (f"a private network namespace could not be made ({e.strerror or e}; it needs root, or user "
               "namespaces)")
        if mode == "private":
            raise ClusterError(f"--network private: {why}. Run as root, or use --network host.") from None
        yield f"network: WARNING: {why}. {EXPOSED}"
        return
    try:
        yield ("network: private (loopback only): the job's servers cannot be reached from other hosts, and the job "
               "cannot reach them either; pass --network host if it reads data over the network")
    finally:
        _leave(original)
