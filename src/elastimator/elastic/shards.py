"""The shard book: which index ranges of which data set each worker trains, as a pure state machine.

No I/O, no clocks, no threads: every method takes the facts (who asked, what
was consumed) and returns a decision as data. The shard service wraps it;
tests drive it step by step.

Life of a shard: TODO -> DOING (an owner, and how many records it reported as
trained) -> DONE. A worker that fails gives its DOING shards back: the
untrained remainder becomes a new TODO shard. The next epoch's shards are made
as soon as the current epoch has none left TODO, so fast workers never idle
while stragglers finish.

Sealing ties data progress to checkpoints: `seal()` snapshots progress right
before checkpoint N is written, `commit(seal_id, N)` keeps it once the save
succeeded, and `restore(N)` rewinds to it — records trained after checkpoint N
go back to TODO together with the model state that forgot them.

Every hand-out gets a lease, a number that never repeats. A rewind raises the
book's `lease_floor` past every lease handed out so far: a worker that learns the
new floor drops the batches it still holds of older leases before training them.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from elastimator.errors import ElastimatorError


class ShardServiceError(ElastimatorError, ValueError):
    """A request the shard book cannot honour (unknown data set, foreign shard, ...)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """A data set the service hands out in shards."""

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
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ShardServiceError(f"data set {self.name!r}: {field} must be an int >= {minimum}; got {value!r}.")
        if not isinstance(self.shuffle, bool):
            raise ShardServiceError(f"data set {self.name!r}: shuffle must be true or false; got {self.shuffle!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ShardServiceError(f"data set {self.name!r}: seed must be an int; got {self.seed!r}.")


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


@dataclasses.dataclass(frozen=True)
class Drained:
    """Every shard is out and the asking worker holds all those left: it should end its input and finish them.

    (Waiting instead would deadlock a worker that reports only after several steps, as with
    `RunConfig(steps_per_execution > 1)`: its call needs a batch that only its own report can free.)
    """


@dataclasses.dataclass(frozen=True)
class Finished:
    """Every epoch is done."""


@dataclasses.dataclass
class _Dataset:
    spec: DatasetSpec
    todo: list[Shard]
    doing: dict[int, Shard]
    done: list[Shard]
    epoch: int
    next_id: int


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
        self._next_seal = 1

    # --- data sets ---------------------------------------------------------------------------

    def add_dataset(self, spec: DatasetSpec) -> None:
        """Registers a data set; registering the same spec again is a no-op."""
        existing = self._datasets.get(spec.name)
        if existing is not None:
            if existing.spec != spec:
                raise ShardServiceError(
                    f"data set {spec.name!r} is already registered as {existing.spec}; got a different {spec}.")
            return
        dataset = _Dataset(spec=spec, todo=[], doing={}, done=[], epoch=-1, next_id=0)
        self._open_next_epoch(dataset)
        self._datasets[spec.name] = dataset  # only once its first epoch is built: a failure registers nothing

    def _get(self, name: str) -> _Dataset:
        try:
            return self._datasets[name]
        except KeyError:
            raise ShardServiceError(
                f"unknown data set {name!r}; registered: {sorted(self._datasets)}.") from None

    def _open_next_epoch(self, dataset: _Dataset) -> None:
        spec = dataset.spec
        if dataset.epoch + 1 >= spec.epochs:
            return
        dataset.epoch += 1
        shards = []
        for start in range(0, spec.size, spec.shard_size):
            shards.append(Shard(dataset.next_id, dataset.epoch, start, min(spec.size, start + spec.shard_size)))
            dataset.next_id += 1
        if spec.shuffle:
            random.Random(spec.seed * 1_000_003 + dataset.epoch).shuffle(shards)
        dataset.todo.extend(shards)

    # --- the worker protocol ---------------------------------------------------------------------

    def request(self, name: str, worker: str) -> Assigned | Wait | Drained | Finished:
        """The next shard for `worker`."""
        dataset = self._get(name)
        if not dataset.todo:
            self._open_next_epoch(dataset)
        if dataset.todo:
            shard = dataset.todo.pop(0)
            shard.owner = worker
            shard.lease = self._lease(self._next_lease)
            self._next_lease += 1
            dataset.doing[shard.id] = shard
            if not dataset.todo:
                self._open_next_epoch(dataset)
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

    @staticmethod
    def is_current(lease: int, floor: int) -> bool:
        """Whether `lease` survives the rewinds that `floor` (a book's lease_floor) stands for."""
        return lease >> 32 == floor >> 32 and lease >= floor

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
            raise ShardServiceError(
                f"worker {worker!r} reported shard {shard_id} (lease {lease}) of {name!r}, which is held by {owner}.")
        if isinstance(consumed, bool) or not isinstance(consumed, int) or consumed < 0:
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
        if shard.consumed == shard.length:
            del dataset.doing[shard_id]
            shard.owner = None
            dataset.done.append(shard)

    def fail_worker(self, worker: str) -> int:
        """Gives `worker`'s shards back from where it stopped; returns how many went back."""
        returned = 0
        for dataset in self._datasets.values():
            for shard_id, shard in list(dataset.doing.items()):
                if shard.owner == worker:
                    del dataset.doing[shard_id]
                    self._give_back(dataset, shard)
                    returned += 1
        return returned

    @staticmethod
    def _give_back(dataset: _Dataset, shard: Shard) -> None:
        """The trained part is done; the rest goes to the front of the queue as a new shard."""
        if shard.consumed:
            dataset.done.append(Shard(shard.id, shard.epoch, shard.start, shard.start + shard.consumed,
                                      consumed=shard.consumed))
        remainder = Shard(dataset.next_id, shard.epoch, shard.start + shard.consumed, shard.end)
        dataset.next_id += 1
        dataset.todo.insert(0, remainder)

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
        return self._committed.setdefault(checkpoint_step, state)

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
                f"no committed seal for checkpoint step {checkpoint_step}; have {sorted(self._committed)}.")
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
        self._committed[checkpoint_step] = state
        self._seals = {}
        return holders

    # --- inspection and persistence --------------------------------------------------------------

    def status(self, name: str) -> dict[str, Any]:
        """Counts of shards and records by state, and the epoch being handed out."""
        dataset = self._get(name)
        records = lambda shards: sum(s.length - s.consumed for s in shards)  # noqa: E731
        return {
            "epoch": dataset.epoch,
            "todo_shards": len(dataset.todo), "doing_shards": len(dataset.doing), "done_shards": len(dataset.done),
            "todo_records": records(dataset.todo),
            "doing_records": records(dataset.doing.values()),
            "trained_records": sum(s.consumed for s in dataset.done) + sum(s.consumed for s in dataset.doing.values()),
            "finished": not dataset.todo and not dataset.doing and dataset.epoch + 1 >= dataset.spec.epochs,
        }

    def to_dict(self) -> dict:
        """A JSON-ready copy of the whole book (data sets and progress; not pending seals)."""
        return {
            "datasets": {
                name: {
                    "spec": dataclasses.asdict(d.spec),
                    "todo": [dataclasses.asdict(s) for s in d.todo],
                    "doing": [dataclasses.asdict(s) for s in d.doing.values()],
                    "done": [dataclasses.asdict(s) for s in d.done],
                    "epoch": d.epoch,
                    "next_id": d.next_id,
                }
                for name, d in self._datasets.items()
            },
            "next_lease": self._next_lease,
            "next_seal": self._next_seal,
        }

    @classmethod
    def from_dict(cls, state: dict) -> "ShardBook":
        """Rebuilds a book from `to_dict()` output.

        Raises:
            ShardServiceError: when the state is malformed (never silently resets).
        """
        book = cls()
        try:
            for name, d in state["datasets"].items():
                doing = [Shard(**s) for s in d["doing"]]
                book._datasets[name] = _Dataset(
                    spec=DatasetSpec(**d["spec"]), todo=[Shard(**s) for s in d["todo"]],
                    doing={s.id: s for s in doing}, done=[Shard(**s) for s in d["done"]],
                    epoch=int(d["epoch"]), next_id=int(d["next_id"]))
            book._next_lease = int(state["next_lease"])
            book._next_seal = int(state["next_seal"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ShardServiceError(f"shard state is malformed ({type(e).__name__}: {e}).") from None
        return book
