"""Probing a TCP address: shared by the engine (waiting for a cluster's servers) and the launcher."""

from __future__ import annotations

import socket
import time
from typing import Callable, Sequence


def reachable(address: str, timeout_secs: float = 1.0) -> bool:
    """Whether a "host:port" accepts TCP connections now."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_secs):
            return True
    except OSError:
        return False


def reachable_within(addresses: Sequence[str], timeout_secs: float, poll_secs: float = 0.2,
                     waiting: Callable[[list[int], float], None] | None = None) -> list[int]:
    """The indices of `addresses` that accept TCP connections, probing every `poll_secs` until all do or
    `timeout_secs` have passed; `waiting(missing indices, seconds left)` hears of each probe that found some
    missing, while there is time left."""
    deadline = time.monotonic() + timeout_secs
    while True:
        up = [i for i, address in enumerate(addresses) if reachable(address)]
        left = deadline - time.monotonic()
        if len(up) == len(addresses) or left <= 0:
            return up
        if waiting is not None:
            waiting([i for i in range(len(addresses)) if i not in up], left)
        time.sleep(poll_secs)
