"""How many files a process serving thousands of workers may hold open.

Each worker of a job holds two connections to the shard service (its report line and its gRPC channel), and
most Linux systems start a process with a soft limit of 1,024 open files under a far higher hard limit: a
service of 500 workers would run out, and then fail to write a seal, which is a file too. A process may raise
its own soft limit up to the hard one without privileges, as servers built for many connections do (Go's
runtime does it for every program); `raise_limit` does that, as far as it is needed.
"""

from __future__ import annotations

import logging

try:
    import resource
except ImportError:  # not a POSIX system: no limit this code can read or raise
    resource = None

logger = logging.getLogger("elastimator")

UNKNOWN_LIMIT = 1 << 20
"""What `raise_limit` answers where the platform tells no limit."""


def raise_limit(wanted: int) -> int:
    """Raises this process's soft limit on open files to `wanted`, or to the hard limit where that is lower;
    never lowers it. Returns the soft limit in force afterwards."""
    if resource is None:
        return UNKNOWN_LIMIT
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return UNKNOWN_LIMIT
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target <= soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as e:  # e.g. macOS, whose kernel caps it below an unlimited hard limit
        logger.info("Could not raise the open-file limit from %d to %d: %s.", soft, target, e)
        return soft
    logger.debug("Raised the open-file limit from %d to %d.", soft, target)
    return target
