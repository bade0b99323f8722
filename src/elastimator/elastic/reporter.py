"""A trainer's reports to the shard service, sent and acknowledged in two halves of the next training step.

The hook puts each trained batch's report after its step (`put`). The next
step sends it as the step starts (`send`, an op with no inputs, so it runs
beside the forward pass), and waits for the service's acknowledgement right
before the step writes (`settle`, the write gate's check). The round trip
overlaps the forward pass, no thread is woken to carry it, and a process that
dies still has at most one batch trained but unreported.

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
        self._unacknowledged: Acknowledgement | None = None
        """The report sent last, when its acknowledgement has not been read yet."""
        self._error: BaseException | None = None

    def put(self, reports: Sequence[Report]) -> None:
        """Queues one call's reports (one per step it ran); sends nothing."""
        with self._lock:
            self._queued.extend(reports)

    def send(self) -> None:
        """Sends what is queued: all but the last are acknowledged before the next goes out; the last one's
        acknowledgement is left for `settle`."""
        with self._lock:
            self._checked(self._send_queued)

    def settle(self) -> None:
        """Sends what is queued and waits until all of it is acknowledged; raises what a report raised (again at
        every later call: reports after a failed one are never sent)."""
        with self._lock:
            self._checked(self._send_queued)
            self._checked(self._acknowledge)

    close = settle

    def _send_queued(self) -> None:
        while self._queued:
            self._acknowledge()
            report = self._queued.pop(0)
            self._unacknowledged = self._start(report)

    def _acknowledge(self) -> None:
        if self._unacknowledged is not None:
            acknowledged, self._unacknowledged = self._unacknowledged, None
            acknowledged()

    def _checked(self, action: Callable[[], None]) -> None:
        if self._error is not None:
            raise self._error
        try:
            action()
        except BaseException as e:
            self._error = e
            raise
