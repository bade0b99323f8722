"""The shard book: which index ranges of which data set each worker trains, as a pure state machine.

No I/O, no clocks, no threads: every method takes the facts (who asked, what
was consumed) and returns a decision as data. The shard service wraps it;
tests drive it step by step.

Life of a shard: TODO -> DOING (an owner, and how many records it reported as
trained) -> DONE. A worker that fails gives its DOING shards back: the
untrained remainder becomes a new TODO shard, handed out before any other. The
next epoch's shards are handed out as soon as the current epoch has none left
TODO, so fast workers never idle while stragglers finish.

The book's state is proportional to the shards in flight, not to the data: an
epoch's TODO shards are a cursor into a seeded permutation (`Permutation`),
DONE shards are counts, and only DOING shards and given-back remainders are
listed. A seal of a ten-million-shard epoch is as small as one of ten shards.

Sealing ties data progress to checkpoints: `seal()` snapshots progress right
before checkpoint N is written, `commit(seal_id, N)` keeps it once the save
succeeded, and `restore(N)` rewinds to it — records trained after checkpoint N
go back to TODO together with the model state that forgot them.

Every hand-out gets a lease, a number that never repeats. A rewind raises the
book's `lease_floor` past every lease handed out so far: a worker that learns the
new floor drops the batches it still holds of older leases before training them.
Failing a worker raises its own floor (`lease_floor_for`) the same way, so a
process the service gave up on (frozen, not dead) drops every batch it queued of
the shards that went to others, when it wakes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from elastimator._validate import is_int
from elastimator.elastic.permutation import Permutation
from elastimator.errors import ElastimatorError

SHARD_TAG = "shard_tag"
"""The step output an elastic input declares for each batch (`training_step.StepInput`): int64
[shard id, lease, first record, records], which the report hook sends once the step has trained the batch."""

_STATE_VERSION = 2
COMMITTED_KEPT = 10
"""Committed seals a book keeps in memory: the newest, by checkpoint step."""


class ShardServiceError(ElastimatorError, ValueError):
    """A request the shard book cannot honour (foreign shard, malformed field, ...)."""

    status = "FAILED_PRECONDITION"
    """The gRPC status name a transport answers it with; the client raises the same class from it (`error_for`)."""


class InvalidRequestError(ShardServiceError):
    """A call whose fields are malformed (a missing field, a wrong type, a negative count): refused before the
    book is touched."""

    status = "INVALID_ARGUMENT"


class UnknownDataSetError(ShardServiceError):
    """A call names a data set the service has not registered."""

    status = "NOT_FOUND"


class LeaseTakenBackError(ShardServiceError):
    """A report of a shard the worker no longer holds: the service took its lease back (a rewind, or the worker
    was silent too long) and the shard's records went back with it."""

    status = "ABORTED"


def error_for(status: str, message: str) -> ShardServiceError:
    """The error a client raises for a refusal the service answered with gRPC status name `status`."""
    kinds = {kind.status: kind for kind in (UnknownDataSetError, LeaseTakenBackError)}
    return kinds.get(status, ShardServiceError)(message)


TOKEN_REFUSED = "missing or wrong job token; pass the job's token (ELASTIMATOR_JOB_TOKEN)."
"""What every transport of the shard service answers (as UNAUTHENTICATED) to a call without the job's token."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardingSpec:
    """How the shard service cuts a data set into shards and hands them out (how records are read and parsed is
    `data.DataSetSpec`'s business)."""

    name: str
    size: int
    """Records in the data set (a reader's count_data())."""
    shard_size: int
    """Records per shard."""
    epochs: int = 1
    shuffle: bool = False
    """Hand out each epoch's shards in a seeded random order."""
    seed: int = 0

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ShardServiceError(f"data set name must be a non-empty string; got {self.name!r}.")
        for field in ("size", "shard_size", "epochs"):
            value = getattr(self, field)
            minimum = 0 if field == "size" else 1
            if not is_int(value, minimum=minimum):
                raise ShardServiceError(f"data set {self.name!r}: {field} must be an int >= {minimum}; got {value!r}.")
        if not isinstance(self.shuffle, bool):
            raise ShardServiceError(f"data set {self.name!r}: shuffle must be true or false; got {self.shuffle!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ShardServiceError(f"data set {self.name!r}: seed must be an int; got {self.seed!r}.")

    @property
    def shards_per_epoch(self) -> int:
        return -(-self.size // self.shard_size)


@dataclasses.dataclass
class Shard:
    """Records [start, end) of one epoch; `consumed` of them reported trained."""

    id: int
    epoch: int
    start: int
    end: int
    owner: str | None = None
    consumed: int = 0
    lease: int = 0
    """Which hand-out of this shard the owner holds; reports must name it (stale ones are refused)."""

    @property
    def length(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict:
        """Its fields, JSON-ready (`dataclasses.asdict` took ten times as long: a seal lists every shard out)."""
        return {"id": self.id, "epoch": self.epoch, "start": self.start, "end": self.end, "owner": self.owner,
                "consumed": self.consumed, "lease": self.lease}


@dataclasses.dataclass(frozen=True)
class Assigned:
    """The worker should train records [start, end) of `epoch`, then report under `shard_id` and `lease`."""

    shard_id: int
    epoch: int
    start: int
    end: int
    lease: int = 0


@dataclasses.dataclass(frozen=True)
class Wait:
    """Every shard is out, but other workers may still give some back: ask again later."""

    opening: bool = False
    """The service hands out nothing yet: it resumed from a seal and waits for the chief to restore the
    checkpoint. Shards will come, whatever the other workers hold."""


@dataclasses.dataclass(frozen=True)
class Drained:
    """Every shard is out and the asking worker holds all those left: it should end its input and finish them.

    (Waiting instead would deadlock a worker that reports only after several steps, as with
    `RunConfig(steps_per_execution > 1)`: its call needs a batch that only its own report can free.)
    """


@dataclasses.dataclass(frozen=True)
class Finished:
    """Every epoch is done."""


@dataclasses.dataclass(frozen=True)
class Failed:
    """The data set cannot be trained on: more distinct malformed records than its limit, job-wide."""

    message: str


@dataclasses.dataclass
class _Dataset:
    spec: ShardingSpec
    epoch: int
    """The epoch whose shards are being handed out."""
    cursor: int
    """How many of that epoch's shards (in its shuffled order) are handed out."""
    returned: list[Shard]
    """Untrained remainders given back by failed workers: handed out first."""
    doing: dict[int, Shard]
    next_id: int
    """The id of the next remainder shard (base shards have ids below spec.epochs * shards per epoch)."""
    done_shards: int = 0
    trained_records: int = 0
    """Records reported trained, in DONE and DOING shards."""
    handed_records: int = 0
    """Records of the current epoch's shards handed out (returned remainders not included)."""
    bad_records: dict[str, str] = dataclasses.field(default_factory=dict)
    """Distinct malformed records found by any worker: where (file:line) -> why. Sealed with checkpoints."""
    failure: str | None = None
    """Why the data set failed (past max_bad_records). Not sealed: a job resumed with a larger limit goes on."""
    _order: Permutation | None = dataclasses.field(default=None, compare=False, repr=False)
    _order_epoch: int = dataclasses.field(default=-1, compare=False, repr=False)

    def order(self) -> Permutation | None:
        """The current epoch's hand-out order: base shard indexes."""
        if self.spec.shuffle and self._order_epoch != self.epoch:
            self._order = Permutation(self.spec.shards_per_epoch, self.spec.seed * 1_000_003 + self.epoch)
            self._order_epoch = self.epoch
        return self._order if self.spec.shuffle else None

    def base_shard(self, position: int) -> Shard:
        """The shard at `position` of the current epoch's order."""
        order = self.order()
        index = order[position] if order is not None else position
        start = index * self.spec.shard_size
        return Shard(self.epoch * self.spec.shards_per_epoch + index, self.epoch, start,
                     min(self.spec.size, start + self.spec.shard_size))

    def next_todo(self) -> Shard | None:
        """Takes the next TODO shard (opening the next epoch when this one is all handed out), or None."""
        if self.returned:
            return self.returned.pop(0)
        n = self.spec.shards_per_epoch
        while self.cursor >= n:
            if n == 0 or self.epoch + 1 >= self.spec.epochs:
                return None
            self.epoch, self.cursor, self.handed_records = self.epoch + 1, 0, 0
        shard = self.base_shard(self.cursor)
        self.cursor += 1
        self.handed_records += shard.length
        return shard

    def has_todo(self) -> bool:
        n = self.spec.shards_per_epoch
        return bool(self.returned) or self.cursor < n or (n > 0 and self.epoch + 1 < self.spec.epochs)


class ShardBook:
    """Shards of every registered data set, their owners and their progress.

    Args:
        incarnation: Distinguishes this book's leases from those of an earlier
            service process (a restarted service passes a new one), so a report
            made to a service that has since died can never match a new hand-out.
    """

    def __init__(self, incarnation: int = 0):
        if not 0 <= incarnation < 2**31:
            raise ShardServiceError(f"incarnation must be in [0, 2**31); got {incarnation}.")
        self._incarnation = incarnation
        self._next_lease = 1
        self._floor = 1
        self._datasets: dict[str, _Dataset] = {}
        self._seals: dict[int, dict] = {}
        self._committed: dict[int, dict] = {}
        """The newest COMMITTED_KEPT committed seals, by checkpoint step (a service's seal store keeps them on
        disk): a seal lists every shard in flight, so keeping every one would grow with the job's length."""
        self._next_seal = 1
        self._worker_floors: dict[str, int] = {}
        """Per worker, the first lease number handed out after it was last failed: its older ones were taken back."""

    # --- data sets ---------------------------------------------------------------------------

    def add_dataset(self, spec: ShardingSpec) -> None:
        """Registers a data set; registering the same spec again is a no-op."""
        existing = self._datasets.get(spec.name)
        if existing is not None:
            if existing.spec != spec:
                raise ShardServiceError(
                    f"data set {spec.name!r} is already registered as {existing.spec}; got a different {spec}.")
            return
        self._datasets[spec.name] = _Dataset(spec=spec, epoch=0, cursor=0, returned=[], doing={},
                                             next_id=spec.epochs * spec.shards_per_epoch)

    def _get(self, name: str) -> _Dataset:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownDataSetError(
                f"unknown data set {name!r}; registered: {sorted(self._datasets)}.") from None

    # --- the worker protocol ---------------------------------------------------------------------

    def request(self, name: str, worker: str) -> Assigned | Wait | Drained | Finished | Failed:
        """The next shard for `worker`."""
        dataset = self._get(name)
        if dataset.failure is not None:
            return Failed(dataset.failure)
        shard = dataset.next_todo()
        if shard is not None:
            shard.owner = worker
            shard.lease = self._lease(self._next_lease)
            self._next_lease += 1
            dataset.doing[shard.id] = shard
            return Assigned(shard.id, shard.epoch, shard.start + shard.consumed, shard.end, shard.lease)
        if not dataset.doing:
            return Finished()
        return Drained() if all(shard.owner == worker for shard in dataset.doing.values()) else Wait()

    def holds(self, worker: str) -> bool:
        """Whether `worker` holds a shard it has not finished, of any data set."""
        return any(shard.owner == worker for dataset in self._datasets.values() for shard in dataset.doing.values())

    def _lease(self, number: int) -> int:
        return (self._incarnation << 32) | number

    @property
    def lease_floor(self) -> int:
        """The oldest lease still honoured: leases below it, or of another incarnation, were taken back."""
        return self._lease(self._floor)

    def lease_floor_for(self, worker: str | None) -> int:
        """The oldest lease `worker` may still train: above `lease_floor`, every lease it held when it was last
        failed (a frozen process the service gave up on) was taken back with its shards."""
        return self._lease(max(self._floor, self._worker_floors.get(worker, 0)))

    @staticmethod
    def is_current(lease: int, floor: int) -> bool:
        """Whether `lease` survives the rewinds that `floor` (a book's lease_floor) stands for."""
        return ShardBook.same_incarnation(lease, floor) and lease >= floor

    @staticmethod
    def same_incarnation(lease: int, other: int) -> bool:
        """Whether two leases (or lease floors) come from the same run of the service; within one, a book's lease
        floor only rises."""
        return lease >> 32 == other >> 32

    def report(self, name: str, worker: str, shard_id: int, consumed: int, lease: int | None = None,
               offset: int | None = None) -> None:
        """Records that `worker` trained the next `consumed` records of its shard (after the step ran).

        `lease` (from Assigned) tells hand-outs of the same shard apart: a report
        from an earlier hand-out (e.g. one made before a rewind) is refused.
        `offset` (the first record of the batch) makes a report idempotent: one
        already counted (a retry after a lost reply) is ignored, one that skips
        records is refused.
        """
        dataset = self._get(name)
        shard = dataset.doing.get(shard_id)
        if shard is None or shard.owner != worker or (lease is not None and lease != shard.lease):
            owner = "nobody" if shard is None else f"worker {shard.owner!r} (lease {shard.lease})"
            raise LeaseTakenBackError(
                f"worker {worker!r} reported shard {shard_id} (lease {lease}) of {name!r}, which is held by {owner}.")
        if not is_int(consumed, minimum=0):
            raise ShardServiceError(f"consumed must be an int >= 0; got {consumed!r}.")
        if offset is not None:
            expected = shard.start + shard.consumed
            if offset + consumed <= expected:
                return  # already counted
            if offset != expected:
                raise ShardServiceError(
                    f"worker {worker!r} reported records from {offset} of shard {shard_id}, but the next untrained "
                    f"record is {expected}.")
        if shard.consumed + consumed > shard.length:
            raise ShardServiceError(
                f"worker {worker!r} reported {shard.consumed + consumed} records of shard {shard_id}, which has "
                f"{shard.length}.")
        shard.consumed += consumed
        dataset.trained_records += consumed
        if shard.consumed == shard.length:
            del dataset.doing[shard_id]
            dataset.done_shards += 1

    def report_bad(self, name: str, records: list[tuple[str, str]], limit: int) -> tuple[int, str | None]:
        """Counts malformed records a worker found, each (where, why) once job-wide, however many workers,
        epochs or replays meet it; returns the job-wide count and, once it passes `limit`, why the data set
        failed (every later request of it gets `Failed`)."""
        dataset = self._get(name)
        for where, why in records:
            dataset.bad_records.setdefault(where, why)
        count = len(dataset.bad_records)
        if count > limit and dataset.failure is None:
            first = "; ".join(f"{where}: {why}" for where, why in list(dataset.bad_records.items())[:5])
            dataset.failure = (f"{count} malformed record(s) in {name!r} across the job, more than "
                               f"max_bad_records={limit}. First ones: {first}.")
        return count, dataset.failure

    def release(self, name: str, worker: str, shard_id: int, lease: int) -> bool:
        """`worker` gives back one shard it holds and will not train (its input was re-created while the shard
        was being handed out); returns whether it still held it."""
        if not self.leased(name, worker, shard_id, lease):
            return False
        dataset = self._get(name)
        shard = dataset.doing.pop(shard_id)
        self._give_back(dataset, shard)
        return True

    def leased(self, name: str, worker: str, shard_id: int, lease: int) -> bool:
        """Whether `worker` still holds shard `shard_id` of `name` under `lease`."""
        shard = self._get(name).doing.get(shard_id)
        return shard is not None and shard.owner == worker and shard.lease == lease

    def fail_worker(self, worker: str) -> int:
        """Gives `worker`'s shards back from where it stopped; returns how many went back."""
        return self.fail_workers([worker])[worker]

    def fail_workers(self, workers: Sequence[str]) -> dict[str, int]:
        """`fail_worker` for each of `workers` in turn, in one pass over the shards in flight (a service that
        reaps a thousand silent workers at once would otherwise hold the book for a pass per worker); returns
        how many shards went back, per worker."""
        failing = dict.fromkeys(workers, 0)
        for dataset in self._datasets.values():
            held: dict[str, list[Shard]] = {}
            for shard in dataset.doing.values():
                if shard.owner in failing:
                    held.setdefault(shard.owner, []).append(shard)
            for worker in failing:  # given back worker by worker, as one call per worker did
                for shard in held.get(worker, ()):
                    del dataset.doing[shard.id]
                    self._give_back(dataset, shard)
                    failing[worker] += 1
        for worker in failing:
            self._worker_floors[worker] = self._next_lease
        return failing

    @staticmethod
    def _give_back(dataset: _Dataset, shard: Shard) -> None:
        """The trained part is done; the rest goes to the front of the queue as a new shard."""
        if shard.consumed:
            dataset.done_shards += 1
        remainder = Shard(dataset.next_id, shard.epoch, shard.start + shard.consumed, shard.end)
        dataset.next_id += 1
        dataset.returned.insert(0, remainder)

    # --- sealing with checkpoints ----------------------------------------------------------------

    def seal(self) -> int:
        """Snapshots progress (right before a checkpoint save); returns the seal id."""
        seal_id = self._next_seal
        self._next_seal += 1
        self._seals = {seal_id: self.to_dict()}  # only the newest pending seal matters
        return seal_id

    def pending(self, seal_id: int) -> dict:
        """The state sealed under `seal_id`, not yet committed."""
        if seal_id not in self._seals:
            raise ShardServiceError(f"no pending seal {seal_id}.")
        return self._seals[seal_id]

    def commit(self, seal_id: int, checkpoint_step: int) -> dict:
        """Keeps seal `seal_id` as the data position of checkpoint `checkpoint_step`; returns it.

        A step that already has a committed seal keeps it: the same step is saved
        again only when a session is re-created from that checkpoint, before the
        data position is rewound, and that later seal would describe the wrong data.
        """
        state = self._seals.pop(seal_id, None)
        if state is None:
            raise ShardServiceError(f"no pending seal {seal_id}; seal() right before each checkpoint save.")
        state = self._committed.setdefault(checkpoint_step, state)
        self._forget_old_seals()
        return state

    def _forget_old_seals(self) -> None:
        while len(self._committed) > COMMITTED_KEPT:
            del self._committed[min(self._committed)]

    def is_committed(self, checkpoint_step: int) -> bool:
        return checkpoint_step in self._committed

    def restore(self, checkpoint_step: int, committed: dict | None = None) -> set[str]:
        """Rewinds to the data position of checkpoint `checkpoint_step`; returns who held shards at the seal.

        Shards that were out at the seal come back TODO from their sealed offsets:
        the workers that held them restart from the checkpoint too.
        """
        state = committed if committed is not None else self._committed.get(checkpoint_step)
        if state is None:
            raise ShardServiceError(
                f"no committed seal for checkpoint step {checkpoint_step}; this book holds those of steps "
                f"{sorted(self._committed)} (the newest {COMMITTED_KEPT}). Restore one of those, or give the service "
                "a seal store (every job's service has one: model_dir/shards/), which keeps older ones.")
        restored = ShardBook.from_dict(state)
        # Ids and leases never repeat: a report from before the rewind must not match a new hand-out.
        self._next_lease = max(self._next_lease, restored._next_lease)
        self._floor = self._next_lease
        holders: set[str] = set()
        for name, dataset in restored._datasets.items():
            current = self._datasets.get(name)
            if current is not None:
                dataset.next_id = max(dataset.next_id, current.next_id)
            for shard in sorted(dataset.doing.values(), key=lambda s: -s.id):
                holders.add(shard.owner)
                del dataset.doing[shard.id]
                ShardBook._give_back(dataset, shard)
        self._datasets = restored._datasets
        # Seals of later steps describe the training this rewind abandons: the same steps saved again get new ones.
        self._committed = {step: kept for step, kept in self._committed.items() if step < checkpoint_step}
        self._committed[checkpoint_step] = state
        self._forget_old_seals()
        self._seals = {}
        return holders

    # --- inspection and persistence --------------------------------------------------------------

    def status(self, name: str) -> dict[str, Any]:
        """Counts of shards and records by state, and the epoch being handed out."""
        dataset = self._get(name)
        records = lambda shards: sum(s.length - s.consumed for s in shards)  # noqa: E731
        unopened = dataset.spec.shards_per_epoch - dataset.cursor
        return {
            "epoch": dataset.epoch,
            "todo_shards": len(dataset.returned) + unopened,
            "doing_shards": len(dataset.doing), "done_shards": dataset.done_shards,
            "todo_records": records(dataset.returned) + dataset.spec.size - dataset.handed_records,
            "doing_records": records(dataset.doing.values()),
            "trained_records": dataset.trained_records,
            "bad_records": len(dataset.bad_records),
            "finished": not dataset.has_todo() and not dataset.doing,
        }

    def to_dict(self) -> dict:
        """A JSON-ready copy of the whole book (data sets and progress; not pending seals).

        Its size grows with the shards in flight and given back, never with the data set.
        """
        shards = lambda listed: [s.to_dict() for s in listed]  # noqa: E731
        return {
            "version": _STATE_VERSION,
            "datasets": {
                name: {
                    "spec": dataclasses.asdict(d.spec), "epoch": d.epoch, "cursor": d.cursor,
                    "returned": shards(d.returned), "doing": shards(d.doing.values()), "next_id": d.next_id,
                    "done_shards": d.done_shards, "trained_records": d.trained_records,
                    "handed_records": d.handed_records, "bad_records": dict(d.bad_records),
                }
                for name, d in self._datasets.items()
            },
            "next_lease": self._next_lease,
            "next_seal": self._next_seal,
        }

    @classmethod
    def from_dict(cls, state: dict) -> "ShardBook":
        """Rebuilds a book from `to_dict()` output (or from a seal written before states were compact).

        Raises:
            ShardServiceError: when the state is malformed (never silently resets).
        """
        book = cls()
        try:
            legacy = state.get("version") is None
            for name, d in state["datasets"].items():
                dataset = _legacy_dataset(d) if legacy else _Dataset(
                    spec=ShardingSpec(**d["spec"]), epoch=int(d["epoch"]), cursor=int(d["cursor"]),
                    returned=[Shard(**s) for s in d["returned"]], doing={s["id"]: Shard(**s) for s in d["doing"]},
                    next_id=int(d["next_id"]), done_shards=int(d["done_shards"]),
                    trained_records=int(d["trained_records"]), handed_records=int(d["handed_records"]),
                    bad_records={str(k): str(v) for k, v in d.get("bad_records", {}).items()})
                book._datasets[name] = dataset
            book._next_lease = int(state["next_lease"])
            book._next_seal = int(state["next_seal"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ShardServiceError(f"shard state is malformed ({type(e).__name__}: {e}).") from None
        return book


def _legacy_dataset(d: dict) -> _Dataset:
    """A data set as seals before version 2 listed it (every TODO and DONE shard).

    Its TODO list becomes the given-back list, ahead of an epoch marked as all handed out; TODO shards get new
    ids above every base shard id (legacy ids were a plain counter, which base ids of later epochs could meet).
    """
    spec = ShardingSpec(**d["spec"])
    done = [Shard(**s) for s in d["done"]]
    doing = [Shard(**s) for s in d["doing"]]
    first_id = max(int(d["next_id"]), spec.epochs * spec.shards_per_epoch)
    returned = [Shard(first_id + i, int(s["epoch"]), int(s["start"]), int(s["end"])) for i, s in enumerate(d["todo"])]
    return _Dataset(spec=spec, epoch=max(int(d["epoch"]), 0), cursor=spec.shards_per_epoch, returned=returned,
                    doing={s.id: s for s in doing}, next_id=first_id + len(returned), done_shards=len(done),
                    trained_records=sum(s.consumed for s in done + doing), handed_records=spec.size)
