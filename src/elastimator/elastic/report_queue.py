"""A trainer's reports to the shard service: each sent as its call ends, acknowledged before the next call writes.

The hook puts each trained batch's report as its training call ends (`put`),
and the report goes out at once, while the host runs the hooks between two
calls. The next call's write gate, which runs as the call takes its batch
(beside the forward pass), waits for its acknowledgement (`settle`), and the
call's writes wait for the gate. No thread is woken to carry a report, and a
process that dies still has at most one batch trained but unreported.
A gate that found the report in the trainer's report ring, with no seal
pending, tells the reporter so (`acknowledged`): nothing waits for it on the
host.

A report put when no call follows (the input waits for other workers' shards,
or has ended) is settled when the input asks (`settle` from its wait) or when
training ends (`close`): the service counts the shard as done only once it
hears of its last batch, and a report the service held back while the chief
saved a checkpoint is sent again only as it is settled.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

Report = tuple[int, int, int, int]
"""(shard id, lease, first record, records) of one trained batch."""
Acknowledgement = Callable[[], None]
"""Waits until the service has counted a report sent; raises what the service or the transport raised."""


class ReportQueue:
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
        """What waits for the report sent last, until it is acknowledged."""
        self._error: BaseException | None = None

    def put(self, reports: Sequence[Report]) -> None:
        """Queues one call's reports (one per step it ran) and sends the first, unless one sent is still
        unacknowledged. A failure to send is raised by the next `settle`."""
        with self._lock:
            self._queued.extend(reports)
            if self._error is None:
                try:
                    self._send_next()
                except BaseException as e:  # raised where the caller waits for the reports: settle
                    self._error = e

    def settle(self) -> None:
        """Waits until every report put is acknowledged, each before the next goes out; raises what a report
        raised (again at every later call: reports after a failed one are never sent)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            try:
                while self._send_next():
                    acknowledged, self._unacknowledged = self._unacknowledged, None
                    acknowledged()
            except BaseException as e:
                self._error = e
                raise

    close = settle

    def acknowledged(self) -> None:
        """Every report sent is in (a write gate saw it in the report ring): none is waited for again."""
        with self._lock:
            if self._error is None:
                self._unacknowledged = None

    def _send_next(self) -> bool:
        """Sends the next report queued unless one sent is still unacknowledged; whether one now is."""
        if self._unacknowledged is None and self._queued:
            self._unacknowledged = self._start(self._queued.pop(0))
        return self._unacknowledged is not None
