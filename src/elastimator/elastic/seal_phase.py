"""The shard service's seal phase, as data: which reports it holds and whether it hands out shards.

No I/O, no clocks, no threads: `step(phase, event)` is a pure function, and the
service (`service.py`) is the shell that holds the current phase under its lock,
turns what happens into events, and marks the trainers' report rings as the
phase says (`Phase.holds`). Scenarios are tested with a number for a clock.

The phases::

    OPEN --Sealed--> SEALING --Ended (commit, a seal that failed, its timeout, a rewind)--> OPEN
     ^                  |                       (or back to RESUMING, where it was sealed)
     |               Opened (the hand-out opens; the commit still ends the seal)
     |                  v
     +--Opened-- RESUMING <--Resumed-- (any: the service started from a seal)

* OPEN: shards are handed out, every report is counted.
* SEALING: the chief (`sealer`) sealed the book for a checkpoint and has not committed it yet: other workers'
  reports are answered "sealing" (sent again) and their rings are held, so the checkpoint holds at most one batch
  per worker that its seal does not know of. A seal past `timeout_secs` without its commit (a chief that died
  mid-save) has lapsed (`lapsed`): the shell ends it.
* RESUMING: the service started from a checkpoint's seal; shards wait until the chief has put the model back
  to that checkpoint (`Opened`): what workers trained meanwhile against the parameter servers is wiped.

A seal made while RESUMING holds reports like any other and returns to RESUMING as it ends (`Sealing.after`); a
second seal before the commit replaces the first.
"""

from __future__ import annotations

import dataclasses
from typing import Union


@dataclasses.dataclass(frozen=True)
class Open:
    """Shards are handed out; every report is counted."""

    hands_out = True

    def holds(self, worker: str | None) -> bool:
        return False


@dataclasses.dataclass(frozen=True)
class Resuming:
    """Resumed from a seal: shards wait for the chief's restore; reports are counted."""

    hands_out = False

    def holds(self, worker: str | None) -> bool:
        return False


@dataclasses.dataclass(frozen=True)
class Sealing:
    """A seal waits for its commit: reports of workers other than `sealer` wait."""

    sealer: str
    """The worker that sealed (the chief; "" for a seal a caller without a name made)."""
    seal_id: int
    """The book's id of the seal (`ShardBook.seal`)."""
    since: float
    """When it sealed (the service's clock)."""
    after: Union[Open, Resuming] = Open()
    """The phase the seal ends into."""

    @property
    def hands_out(self) -> bool:
        return self.after.hands_out

    def holds(self, worker: str | None) -> bool:
        """Whether `worker`'s reports wait for the commit (the sealer's own never do)."""
        return worker != self.sealer

    def lapsed(self, now: float, timeout_secs: float) -> bool:
        """Whether the commit is overdue: the seal no longer holds anything (the shell ends it)."""
        return now - self.since > timeout_secs


Phase = Union[Open, Resuming, Sealing]


# --- events: what the service saw --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Sealed:
    """The book was sealed by `sealer` (a seal that the book refused is no event)."""

    sealer: str
    seal_id: int
    at: float


@dataclasses.dataclass(frozen=True)
class Ended:
    """A seal ended: committed, its pending file could not be written, it lapsed, or the book was rewound.
    `seal_id` ends only that seal (None: whichever is pending)."""

    seal_id: int | None = None


@dataclasses.dataclass(frozen=True)
class Opened:
    """The chief has the model at the checkpoint the service resumed from: shards go out again."""


@dataclasses.dataclass(frozen=True)
class Resumed:
    """The service rewound the book to the seal of the checkpoint it starts from: shards wait for `Opened`."""


Event = Union[Sealed, Ended, Opened, Resumed]


def step(phase: Phase, event: Event) -> Phase:
    """The phase after `event` (every transition of the seal phase is here)."""
    if isinstance(event, Sealed):
        after = phase.after if isinstance(phase, Sealing) else phase
        return Sealing(event.sealer, event.seal_id, event.at, after)
    if isinstance(event, Ended):
        if isinstance(phase, Sealing) and event.seal_id in (None, phase.seal_id):
            return phase.after
        return phase
    if isinstance(event, Opened):
        return dataclasses.replace(phase, after=Open()) if isinstance(phase, Sealing) else Open()
    if isinstance(event, Resumed):
        return Resuming()
    raise TypeError(f"expected a seal phase event (Sealed, Ended, Opened, Resumed); got {event!r}.")
