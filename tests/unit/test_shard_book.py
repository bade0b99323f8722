"""The shard book, driven step by step: hand-out, progress, failures, epochs, seals."""

import json
import random

import pytest

from elastimator.elastic.permutation import Permutation
from elastimator.elastic.shards import (
    Assigned,
    ShardingSpec,
    Drained,
    Failed,
    Finished,
    LeaseTakenBackError,
    ShardBook,
    ShardServiceError,
    UnknownDataSetError,
    Wait,
)


def _book(size=10, shard_size=4, epochs=1, **kwargs):
    book = ShardBook()
    book.add_dataset(ShardingSpec(name="train", size=size, shard_size=shard_size, epochs=epochs, **kwargs))
    return book


def _train(book, worker, decision, counts, records=None):
    """The worker trains (part of) its shard: count every record, then report."""
    records = decision.end - decision.start if records is None else records
    for index in range(decision.start, decision.start + records):
        counts[index] = counts.get(index, 0) + 1
    book.report("train", worker, decision.shard_id, records)


def test_two_workers_train_every_record_once():
    book, counts = _book(), {}
    a, b = book.request("train", "a"), book.request("train", "b")
    assert (a.start, a.end, b.start, b.end) == (0, 4, 4, 8)
    _train(book, "a", a, counts)
    c = book.request("train", "a")
    assert (c.start, c.end) == (8, 10)
    _train(book, "b", b, counts)
    _train(book, "a", c, counts)
    assert counts == {i: 1 for i in range(10)}
    assert isinstance(book.request("train", "b"), Finished)
    assert book.status("train")["finished"] and book.status("train")["trained_records"] == 10


def test_next_epoch_opens_once_the_current_one_is_handed_out():
    book = _book(size=8, shard_size=4, epochs=2)
    first, second = book.request("train", "a"), book.request("train", "b")
    assert (first.epoch, second.epoch) == (0, 0)
    # Epoch 0 is all out (b still training): a gets epoch 1 work instead of idling.
    book.report("train", "a", first.shard_id, 4)
    third = book.request("train", "a")
    assert third.epoch == 1 and (third.start, third.end) == (0, 4)


def test_wait_while_others_hold_the_last_shards():
    book = _book(size=4, shard_size=4)
    held = book.request("train", "a")
    assert isinstance(book.request("train", "b"), Wait)
    book.report("train", "a", held.shard_id, 4)
    assert isinstance(book.request("train", "b"), Finished)


def test_a_worker_holding_every_last_shard_is_told_to_drain_not_to_wait():
    book = _book(size=8, shard_size=4)
    first, second = book.request("train", "a"), book.request("train", "a")
    assert isinstance(book.request("train", "a"), Drained) and book.holds("a")
    assert isinstance(book.request("train", "b"), Wait) and not book.holds("b")
    book.report("train", "a", first.shard_id, 4)
    book.report("train", "a", second.shard_id, 4)
    assert not book.holds("a") and isinstance(book.request("train", "a"), Finished)


def test_a_failed_worker_gives_back_only_what_it_did_not_train():
    book, counts = _book(size=8, shard_size=8), {}
    shard = book.request("train", "a")
    _train(book, "a", shard, counts, records=3)
    assert book.fail_worker("a") == 1
    rest = book.request("train", "b")
    assert (rest.start, rest.end) == (3, 8)
    _train(book, "b", rest, counts)
    assert counts == {i: 1 for i in range(8)}


def test_bad_reports_are_refused():
    book = _book()
    shard = book.request("train", "a")
    with pytest.raises(LeaseTakenBackError, match=r"worker 'b' reported shard 0 \(lease None\) of 'train', which is "
                                                r"held by worker 'a' \(lease 1\)"):
        book.report("train", "b", shard.shard_id, 1)
    with pytest.raises(LeaseTakenBackError, match="held by worker 'a'"):  # a stale hand-out of the same shard
        book.report("train", "a", shard.shard_id, 1, lease=shard.lease + 5)
    with pytest.raises(ShardServiceError, match="reported 5 records of shard 0, which has 4"):
        book.report("train", "a", shard.shard_id, 5)
    with pytest.raises(UnknownDataSetError, match=r"unknown data set 'eval'; registered: \['train'\]"):
        book.request("eval", "a")
    with pytest.raises(ShardServiceError, match="already registered"):
        book.add_dataset(ShardingSpec(name="train", size=11, shard_size=4))
    with pytest.raises(ShardServiceError, match="shard_size must be an int >= 1"):
        ShardingSpec(name="x", size=10, shard_size=0)


def test_a_report_from_before_a_rewind_cannot_inflate_progress():
    book = _book(size=20, shard_size=20)
    book.commit(book.seal(), checkpoint_step=0)
    stale = book.request("train", "a")  # handed out after checkpoint 0
    book.restore(0)
    fresh = book.request("train", "a")  # the same shard, handed out again to the same worker
    assert fresh.shard_id == stale.shard_id and fresh.lease != stale.lease
    with pytest.raises(LeaseTakenBackError, match="held by"):
        book.report("train", "a", stale.shard_id, 10, lease=stale.lease)
    book.report("train", "a", fresh.shard_id, 10, lease=fresh.lease)
    assert book.status("train")["trained_records"] == 10


def test_a_rewind_raises_the_lease_floor_past_every_earlier_lease():
    book = _book(size=20, shard_size=5)
    book.commit(book.seal(), checkpoint_step=0)
    before = [book.request("train", w) for w in ("a", "b")]
    assert all(ShardBook.is_current(d.lease, book.lease_floor) for d in before)
    book.restore(0)
    after = book.request("train", "a")
    assert not any(ShardBook.is_current(d.lease, book.lease_floor) for d in before)
    assert ShardBook.is_current(after.lease, book.lease_floor)
    # A lease of another incarnation (a service that died) is never current, whatever its number.
    other = ShardBook(incarnation=7)
    assert not ShardBook.is_current(after.lease, other.lease_floor)
    # The lease counter survives a seal: a book restored elsewhere hands out no lease twice.
    assert ShardBook.from_dict(json.loads(json.dumps(book.to_dict()))).request("train", "c").lease > after.lease


def test_restore_rewinds_data_to_the_checkpoint():
    book, counts = _book(size=12, shard_size=4), {}
    a = book.request("train", "a")
    _train(book, "a", a, counts)  # [0, 4) trained before the checkpoint
    b = book.request("train", "b")
    _train(book, "b", b, counts, records=2)  # [4, 6) trained before the checkpoint
    seal = book.seal()
    book.commit(seal, checkpoint_step=100)
    c = book.request("train", "a")
    _train(book, "a", c, counts)  # [8, 12) trained after it: lost with the model when ps dies
    book.report("train", "b", b.shard_id, 2)  # [6, 8) too
    book.restore(100)
    redo = []
    while isinstance(decision := book.request("train", "a"), Assigned):
        redo.append((decision.start, decision.end))
        book.report("train", "a", decision.shard_id, decision.end - decision.start)
    assert sorted(redo) == [(6, 8), (8, 12)]  # exactly what the checkpoint does not hold
    with pytest.raises(ShardServiceError, match="no committed seal for checkpoint step 7"):
        book.restore(7)
    with pytest.raises(ShardServiceError, match="no pending seal 99"):
        book.commit(99, 200)


def test_shuffle_is_seeded_and_differs_per_epoch():
    def order(seed):
        book = _book(size=40, shard_size=4, epochs=2, shuffle=True, seed=seed)
        starts = []
        while isinstance(d := book.request("train", "a"), Assigned):
            starts.append((d.epoch, d.start))
            book.report("train", "a", d.shard_id, d.end - d.start)
        return starts

    first = order(1)
    assert first == order(1) and first != order(2)
    epoch0 = [s for e, s in first if e == 0]
    epoch1 = [s for e, s in first if e == 1]
    assert sorted(epoch0) == sorted(epoch1) == list(range(0, 40, 4)) and epoch0 != epoch1


def test_state_round_trips_through_json_and_malformed_state_is_refused():
    book = _book(size=10, shard_size=3, epochs=2)
    shard = book.request("train", "a")
    book.report("train", "a", shard.shard_id, 2)
    copy = ShardBook.from_dict(json.loads(json.dumps(book.to_dict())))
    assert copy.to_dict() == book.to_dict()
    assert copy.status("train") == book.status("train")
    with pytest.raises(ShardServiceError, match="shard state is malformed"):
        ShardBook.from_dict({"datasets": {"train": {"spec": {}}}})


def test_random_failures_lose_no_record_and_replay_nothing_trained():
    rng = random.Random(0)
    for trial in range(20):
        epochs = 2
        book, counts = _book(size=97, shard_size=10, epochs=epochs), {}
        workers = ["w0", "w1", "w2"]
        held = {}
        while True:
            worker = rng.choice(workers)
            if worker in held:
                decision = held.pop(worker)
                if rng.random() < 0.2:  # dies after training part of it
                    part = rng.randrange(decision.end - decision.start)
                    for i in range(decision.start, decision.start + part):
                        counts[(decision.epoch, i)] = counts.get((decision.epoch, i), 0) + 1
                    book.report("train", worker, decision.shard_id, part)
                    book.fail_worker(worker)
                    continue
                for i in range(decision.start, decision.end):
                    counts[(decision.epoch, i)] = counts.get((decision.epoch, i), 0) + 1
                book.report("train", worker, decision.shard_id, decision.end - decision.start)
                continue
            decision = book.request("train", worker)
            if isinstance(decision, Finished):
                if not held:
                    break
                continue
            if isinstance(decision, Assigned):
                held[worker] = decision
        assert counts == {(e, i): 1 for e in range(epochs) for i in range(97)}, trial


def test_a_restarted_service_never_repeats_a_lease():
    old = ShardBook(incarnation=1)
    old.add_dataset(ShardingSpec(name="train", size=20, shard_size=20))
    old.commit(old.seal(), checkpoint_step=0)
    sealed = old.to_dict()
    stale = old.request("train", "a")  # handed out by the service that then dies
    new = ShardBook(incarnation=2)
    new.restore(0, committed=sealed)
    fresh = new.request("train", "a")
    assert fresh.shard_id == stale.shard_id and fresh.lease != stale.lease
    with pytest.raises(LeaseTakenBackError, match="held by"):
        new.report("train", "a", stale.shard_id, 5, lease=stale.lease)


def test_reports_are_idempotent_and_contiguous():
    book = _book(size=20, shard_size=20)
    shard = book.request("train", "a")
    book.report("train", "a", shard.shard_id, 10, lease=shard.lease, offset=0)
    book.report("train", "a", shard.shard_id, 10, lease=shard.lease, offset=0)  # a retried report: ignored
    assert book.status("train")["trained_records"] == 10
    with pytest.raises(ShardServiceError, match="reported records from 15 of shard 0, but the next untrained record "
                                                "is 10"):
        book.report("train", "a", shard.shard_id, 5, lease=shard.lease, offset=15)


def test_a_checkpoint_saved_again_keeps_its_first_seal():
    book = _book(size=20, shard_size=10)
    book.commit(book.seal(), checkpoint_step=5)
    shard = book.request("train", "a")
    book.report("train", "a", shard.shard_id, 10)  # trained after checkpoint 5, then lost with the ps
    # The session is re-created from checkpoint 5, which the saver writes again before the rewind.
    book.commit(book.seal(), checkpoint_step=5)
    book.restore(5)
    assert book.status("train")["trained_records"] == 0


def test_a_book_keeps_its_newest_committed_seals_and_a_rewind_drops_the_later_ones():
    book = _book(size=100, shard_size=1)
    for step in range(1, 26):  # a seal lists every shard in flight: 25 of them are not all kept in memory
        _train(book, "a", book.request("train", "a"), {})
        book.commit(book.seal(), checkpoint_step=step)
    assert [s for s in range(1, 26) if book.is_committed(s)] == list(range(16, 26))
    with pytest.raises(ShardServiceError, match=r"holds those of steps \[16, .*25\] \(the newest 10\).*seal store"):
        book.restore(3)
    book.restore(20)
    assert book.status("train")["trained_records"] == 20
    # Steps 21-25 were trained in what the rewind abandoned: saved again, they are sealed anew.
    assert not book.is_committed(21) and book.is_committed(20)
    _train(book, "a", book.request("train", "a"), {})
    assert book.commit(book.seal(), checkpoint_step=21)["datasets"]["train"]["trained_records"] == 21


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 16, 17, 100, 1000, 4097])
def test_a_permutation_is_a_seeded_bijection(n):
    order = [Permutation(n, key=3)[i] for i in range(n)]
    assert sorted(order) == list(range(n))
    assert order == [Permutation(n, key=3)[i] for i in range(n)]  # the same in every process
    if n >= 16:
        assert order != [Permutation(n, key=4)[i] for i in range(n)] and order != list(range(n))


def test_a_seal_grows_with_the_shards_in_flight_not_with_the_data():
    def seal_size(shards):
        book = ShardBook()
        book.add_dataset(ShardingSpec(name="train", size=shards * 100, shard_size=100, epochs=3, shuffle=True))
        held = [book.request("train", f"w{i}") for i in range(64)]
        for worker, decision in enumerate(held[:32]):
            book.report("train", f"w{worker}", decision.shard_id, 50, lease=decision.lease)
        book.fail_worker("w40")
        return len(json.dumps(book.pending(book.seal())))

    small, huge = seal_size(1_000), seal_size(10_000_000)
    assert huge < 20_000 and huge < 1.2 * small  # 10,000x the shards; only the numbers in it got longer


def test_shuffled_epochs_with_failures_and_a_rewind_train_every_record_once():
    book, counts = _book(size=1000, shard_size=7, epochs=2, shuffle=True, seed=5), {}
    sealed_counts = None
    decisions = 0
    while isinstance(decision := book.request("train", "a"), Assigned):
        decisions += 1
        part = decision.end - decision.start if decisions % 11 else (decision.end - decision.start) // 2
        for i in range(decision.start, decision.start + part):
            counts[(decision.epoch, i)] = counts.get((decision.epoch, i), 0) + 1
        book.report("train", "a", decision.shard_id, part, lease=decision.lease)
        if part < decision.end - decision.start:
            book.fail_worker("a")
        if decisions == 90:  # checkpoint 90: later progress is lost with the model and trained again
            book.commit(book.seal(), checkpoint_step=90)
            sealed_counts = dict(counts)
        if decisions == 150:
            book.restore(90)
            counts = dict(sealed_counts)
    assert counts == {(e, i): 1 for e in range(2) for i in range(1000)}
    assert book.status("train")["finished"] and book.status("train")["trained_records"] == 2000


def test_a_seal_written_before_states_were_compact_still_restores():
    """The layout that listed every shard (elastimator before seal version 2), as a model_dir on disk holds it."""
    spec = {"name": "train", "size": 10, "shard_size": 4, "epochs": 2, "shuffle": False, "seed": 0}
    shard = lambda i, s, e, **kw: {"id": i, "epoch": 0, "start": s, "end": e, "owner": None, "consumed": 0,  # noqa
                                   "lease": 0, **kw}
    legacy = {"datasets": {"train": {
        "spec": spec, "epoch": 0, "next_id": 3,
        "todo": [shard(2, 8, 10)], "doing": [shard(1, 4, 8, owner="b", consumed=1, lease=2)],
        "done": [shard(0, 0, 4, consumed=4)]}}, "next_lease": 3, "next_seal": 2}
    book = ShardBook(incarnation=1)
    assert book.restore(7, committed=legacy) == {"b"}
    counts = {(0, i): 1 for i in range(5)}  # [0, 4) and record 4 were trained before the checkpoint
    while isinstance(decision := book.request("train", "a"), Assigned):
        for i in range(decision.start, decision.end):
            counts[(decision.epoch, i)] = counts.get((decision.epoch, i), 0) + 1
        book.report("train", "a", decision.shard_id, decision.end - decision.start, lease=decision.lease)
    assert counts == {(e, i): 1 for e in range(2) for i in range(10)}


def test_bad_records_are_counted_once_job_wide_and_the_first_past_the_limit_fails_every_worker():
    book = _book(size=100, shard_size=10)
    book.commit(book.seal(), checkpoint_step=0)
    assert book.report_bad("train", [("a.csv:3", "expected 2 fields, got 1")], limit=2) == (1, None)
    # The same line again (a replayed batch, a restarted worker, another epoch) counts nothing.
    assert book.report_bad("train", [("a.csv:3", "expected 2 fields, got 1"), ("a.csv:9", "bad")], limit=2) == (2, None)
    book.commit(book.seal(), checkpoint_step=10)
    count, failure = book.report_bad("train", [("a.csv:40", "field 'x' = 'oops' is not a valid float32")], limit=2)
    assert count == 3 and failure.startswith("3 malformed record(s) in 'train' across the job, more than "
                                             "max_bad_records=2. First ones: a.csv:3: expected 2 fields, got 1;")
    assert book.request("train", "another-worker") == Failed(failure)
    assert book.status("train")["bad_records"] == 3
    # Sealed with the checkpoints; the failure is not: resumed with a larger limit, the job goes on.
    book.restore(10)
    assert book.status("train")["bad_records"] == 2 and isinstance(book.request("train", "w"), Assigned)
    assert book.report_bad("train", [("a.csv:40", "...")], limit=5) == (3, None)
    book.restore(0)
    assert book.status("train")["bad_records"] == 0


def test_a_failed_worker_learns_that_every_lease_it_held_was_taken_back():
    """A worker frozen past its heartbeat timeout held several shards (its input queues ahead): when it wakes,
    the floor of its next reply rules out all of them, not only the one whose report was refused."""
    book = _book(size=100, shard_size=10)
    held = [book.request("train", "a"), book.request("train", "a")]
    other = book.request("train", "b")
    book.fail_worker("a")
    again = book.request("train", "a")
    floor = book.lease_floor_for("a")
    assert not any(ShardBook.is_current(d.lease, floor) for d in held) and ShardBook.is_current(again.lease, floor)
    assert ShardBook.is_current(other.lease, book.lease_floor_for("b"))


def test_a_released_shard_goes_back_whole_and_only_its_holder_can_release_it():
    book = _book(size=20, shard_size=10)
    shard = book.request("train", "a")
    assert not book.release("train", "b", shard.shard_id, shard.lease)
    assert not book.release("train", "a", shard.shard_id, shard.lease + 1)
    assert book.release("train", "a", shard.shard_id, shard.lease)
    again = book.request("train", "b")
    assert (again.start, again.end) == (shard.start, shard.end) and not book.holds("a")


def test_failing_many_workers_at_once_leaves_the_book_as_failing_them_one_by_one():
    """A service reaps every silent worker in one pass over the shards in flight: the shards go back in the same
    order, with the same counts and lease floors, as failing the workers one at a time."""
    one_by_one, at_once = _book(size=400, shard_size=10), _book(size=400, shard_size=10)
    for book in (one_by_one, at_once):
        book.add_dataset(ShardingSpec(name="eval", size=100, shard_size=10))
        for i in range(30):  # three shards each of train for w0..w9, one of eval for each
            book.request("train", f"w{i % 10}")
            if i < 10:
                decision = book.request("eval", f"w{i}")
                book.report("eval", f"w{i}", decision.shard_id, 3)
        book.report("train", "w2", 2, 4)  # w2's first shard, partly trained
    failing = ["w7", "w2", "w4", "w9"]
    expected = {worker: one_by_one.fail_worker(worker) for worker in failing}
    assert at_once.fail_workers(failing) == expected == {"w7": 4, "w2": 4, "w4": 4, "w9": 4}
    assert at_once.to_dict() == one_by_one.to_dict()
    assert [at_once.lease_floor_for(w) for w in failing] == [one_by_one.lease_floor_for(w) for w in failing]
    assert at_once.request("train", "w0") == one_by_one.request("train", "w0")  # the same remainder first
