"""A trainer's reports to the shard service, sent in order on a thread of their own.

The training step hands over each batch's report and goes on; the next step's
writes wait for `settle()` (elastimator.estimator.write_gate), so the report's
round trip overlaps the next step's forward and backward pass instead of
delaying it, and a process that dies still has at most one batch trained but
unreported.
"""

from __future__ import annotations

import collections
import threading
from typing import Callable, Sequence

Report = tuple[int, int, int, int]
"""(shard id, lease, first record, records) of one trained batch."""


class Reporter:
    """Sends reports with `send(*report)`, one at a time, in the order they were put."""

    def __init__(self, send: Callable[[int, int, int, int], None]):
        self._send = send
        self._queue: collections.deque[Sequence[Report]] = collections.deque()
        self._changed = threading.Condition()
        self._put = 0
        """Calls' reports put so far; those still queued are not yet sent."""
        self._error: BaseException | None = None
        self._closing = False
        self._thread: threading.Thread | None = None

    def put(self, reports: Sequence[Report]) -> None:
        """Queues one call's reports (one per step it ran); returns at once."""
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="shard-reports", daemon=True)
                self._thread.start()
            self._queue.append(reports)
            self._put += 1
            self._changed.notify_all()

    def settle(self) -> None:
        """Waits until everything put so far is reported; raises what a report raised."""
        with self._changed:
            target = self._put
            while self._put - len(self._queue) < target and self._error is None:
                self._changed.wait()
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        """Settles, then ends the thread."""
        try:
            self.settle()
        finally:
            with self._changed:
                self._closing = True
                self._changed.notify_all()
            if self._thread is not None:
                self._thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closing:
                    self._changed.wait()
                if not self._queue:
                    return
                reports = self._queue[0]
            try:
                for report in reports:
                    self._send(*report)
            except BaseException as e:  # noqa: BLE001 - handed to whoever settles
                with self._changed:
                    self._error = e
                    self._changed.notify_all()
                return
            with self._changed:
                self._queue.popleft()
                self._changed.notify_all()
