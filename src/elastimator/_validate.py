"""The one check for "a count": an integer, not a bool (which Python counts as an int), and large enough."""

from __future__ import annotations

import numbers


def is_int(value: object, minimum: int | None = None) -> bool:
    """Whether `value` is an integer (Python's or NumPy's) but not a bool, and at least `minimum` when given.

    `isinstance(True, int)` holds, so a flag passed where a count belongs would
    otherwise read as 1; each caller words its own error.
    """
    # A plain int first: the ABC check below costs five times as much, and the shard book makes this check for
    # every report of every worker.
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        return False
    return minimum is None or bool(value >= minimum)
