"""Probing a TCP address: shared by the engine (waiting for a cluster's servers) and the launcher."""

from __future__ import annotations

import socket


def reachable(address: str, timeout_secs: float = 1.0) -> bool:
    """Whether a "host:port" accepts TCP connections now."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_secs):
            return True
    except OSError:
        return False
