"""A trainer's reports to the shard service, each sent and acknowledged in the next training step.

The hook puts each trained batch's report after its step (`put`). The next
step's write gate, which runs as the step takes its batch (beside the forward
pass), sends it and waits for the service's acknowledgement (`settle`); the
step's writes wait for the gate. The round trip overlaps the forward pass, no
thread is woken to carry it, and a process that dies still has at most one
batch trained but unreported.

A report put when no step follows (the input waits for other workers' shards,
or has ended) goes out when the input asks (`settle` from its wait) or when
training ends (`close`): the service counts the shard as done only once it
hears of its last batch.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

Report = tuple[int, int, int, int]
"""(shard id, lease, first record, records) of one trained batch."""
Acknowledgement = Callable[[], None]
"""Waits until the service has counted a report sent; raises what the service or the transport raised."""


class Reporter:
    """Sends reports with `start(report)`, one at a time, in the order they were put.

    Args:
        start: Sends one report and returns what waits for its acknowledgement. Each report is acknowledged
            before the next one is sent.
    """

    def __init__(self, start: Callable[[Report], Acknowledgement]):
        self._start = start
        self._lock = threading.Lock()
        self._queued: list[Report] = []
        """Put, not yet sent."""
        self._error: BaseException | None = None

    def put(self, reports: Sequence[Report]) -> None:
        """Queues one call's reports (one per step it ran); sends nothing."""
        with self._lock:
            self._queued.extend(reports)

    def settle(self) -> None:
        """Sends what is queued, each acknowledged before the next goes out; raises what a report raised (again
        at every later call: reports after a failed one are never sent)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            try:
                while self._queued:
                    self._start(self._queued.pop(0))()
            except BaseException as e:
                self._error = e
                raise

    close = settle
