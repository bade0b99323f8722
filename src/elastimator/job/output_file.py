"""Files the command writes appear whole or not at all: a failed command never truncates an existing one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def temporary_path_for(path: str) -> Iterator[str]:
    """A file name beside `path` to write to; it replaces `path` only when the block ends without an error.

    For writers that take a file name (matplotlib's savefig); `replace_on_success` opens it for you.
    """
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    os.close(descriptor)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(temporary, 0o666 & ~umask)  # The permissions an ordinary open() would have given it.
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def replace_on_success(path: str, mode: str = "w", **open_args) -> Iterator[IO]:
    """Opens a temporary file beside `path`; it replaces `path` only when the block ends without an error.

    Example:
        >>> with replace_on_success("predictions.csv", newline="") as f:
        ...     f.write(...)   # an exception here leaves predictions.csv as it was
    """
    with temporary_path_for(path) as temporary, open(temporary, mode, **open_args) as f:
        yield f
