"""The shard service's seal phase as data, and its calls' effects as data: no server, no thread, a number for a
clock."""

import pytest

from elastimator.elastic import seal_phase as sp
from elastimator.elastic.report_ring import ReportRing, RingReader
from elastimator.elastic.seal_store import SealStore
from elastimator.elastic.service import Outcome, ShardService, WriteCommitted, WritePending

TOKEN = "job-token-123"


def test_a_seal_holds_the_reports_of_every_worker_but_the_sealer_until_it_ends():
    sealing = sp.step(sp.Open(), sp.Sealed("chief", seal_id=3, at=10.0))
    assert sealing == sp.Sealing("chief", 3, 10.0, after=sp.Open())
    assert sealing.holds("w0") and not sealing.holds("chief") and sealing.hands_out
    assert not sealing.lapsed(now=40.0, timeout_secs=30.0) and sealing.lapsed(now=40.5, timeout_secs=30.0)
    assert sp.step(sealing, sp.Ended()) == sp.Open()
    assert sp.step(sealing, sp.Ended(seal_id=3)) == sp.Open()
    assert sp.step(sealing, sp.Ended(seal_id=2)) == sealing  # an older seal's failed file ends nothing
    assert not sp.Open().holds("w0") and not sp.Resuming().holds("w0")


def test_a_second_seal_replaces_the_first_and_ends_into_the_same_phase():
    first = sp.step(sp.Resuming(), sp.Sealed("chief", 1, at=0.0))
    second = sp.step(first, sp.Sealed("chief", 2, at=5.0))
    assert second == sp.Sealing("chief", 2, 5.0, after=sp.Resuming())
    assert sp.step(second, sp.Ended()) == sp.Resuming()


def test_resuming_hands_out_nothing_until_opened_and_a_seal_meanwhile_keeps_that():
    assert sp.step(sp.Open(), sp.Resumed()) == sp.Resuming() and not sp.Resuming().hands_out
    assert sp.step(sp.Sealing("chief", 1, 0.0), sp.Resumed()) == sp.Resuming()  # a rewind drops the seal
    sealed = sp.step(sp.Resuming(), sp.Sealed("chief", 1, at=0.0))
    assert not sealed.hands_out and sealed.holds("w0")
    opened = sp.step(sealed, sp.Opened())
    assert opened == sp.Sealing("chief", 1, 0.0, after=sp.Open()) and opened.hands_out  # still sealing
    assert sp.step(opened, sp.Ended()) == sp.Open()
    assert sp.step(sp.Resuming(), sp.Opened()) == sp.Open() == sp.step(sp.Open(), sp.Opened())


def test_an_unknown_event_is_a_clear_error():
    with pytest.raises(TypeError, match="expected a seal phase event .*; got 'seal'"):
        sp.step(sp.Open(), "seal")


def _service(tmp_path, clock=lambda: 0.0) -> ShardService:
    service = ShardService(TOKEN, SealStore(str(tmp_path)), clock=clock)
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 100, "shard_size": 10}})
    return service


def test_a_seal_and_its_commit_return_their_files_as_effects_and_write_nothing_themselves(tmp_path):
    service = _service(tmp_path)
    store = SealStore(str(tmp_path))
    sealed = service.decide("seal", {"checkpoint_step": 5, "worker": "chief"})
    seal_id = sealed.reply["seal_id"]
    assert [type(e) for e in sealed.effects] == [WritePending]
    assert (sealed.effects[0].step, sealed.effects[0].seal_id) == (5, seal_id)
    assert sealed.effects[0].state["datasets"]["train"]["spec"]["size"] == 100
    assert not store.any_for(5)  # decided, not written
    assert isinstance(service.phase, sp.Sealing) and service.phase.sealer == "chief"

    committed = service.decide("commit", {"seal_id": seal_id, "checkpoint_step": 5, "worker": "chief"})
    assert committed.effects == (WriteCommitted(5, committed.effects[0].state),) and not store.steps()
    assert service.phase == sp.Open()
    resealed = service.decide("seal", {"checkpoint_step": 5, "worker": "chief"})
    again = service.decide("commit", {"seal_id": resealed.reply["seal_id"], "checkpoint_step": 5, "worker": "chief"})
    assert resealed.effects == again.effects == ()  # step 5 is committed already: nothing more to write

    service.handle("seal", {"checkpoint_step": 6, "worker": "chief"})  # handle: decide, then its effects
    assert store.any_for(6) and store.read(6)["datasets"]["train"]["spec"]["size"] == 100


def test_calls_without_files_to_write_have_no_effects(tmp_path):
    service = _service(tmp_path)
    assert service.decide("seal", {"worker": "chief"}).effects == ()  # no checkpoint step: nothing on disk
    in_memory = ShardService(TOKEN)
    assert in_memory.decide("seal", {"checkpoint_step": 1, "worker": "chief"}).effects == ()
    request = service.decide("request", {"dataset": "train", "worker": "w0"})
    assert isinstance(request, Outcome) and request.effects == () and request.reply["decision"] == "assigned"


def test_a_report_is_counted_once_whichever_path_brings_it(tmp_path):
    service = _service(tmp_path)
    shards = [service.handle("request", {"dataset": "train", "worker": w}) for w in ("json", "packed", "ring")]
    json_shard, packed_shard, ring_shard = shards
    report = {"dataset": "train", "worker": "json", "shard_id": json_shard["shard_id"], "consumed": 2,
              "lease": json_shard["lease"], "offset": json_shard["start"]}
    for _ in range(2):  # each sent twice: the book counts it once
        service.handle("report", dict(report))
        assert service.report_batch([("packed", "train", packed_shard["shard_id"], 3, packed_shard["lease"],
                                      packed_shard["start"])]) == [(False, packed_shard["lease_floor"])]
    ring = ReportRing.create()
    if ring is not None:
        reader = RingReader.open(ring.path)
        service.attach_ring("ring", reader)
        ring.put("train", ring_shard["shard_id"], ring_shard["lease"], ring_shard["start"], 4)
        service.drain_reports()
        service.detach_ring("ring", reader)  # what it holds is taken once more as it closes: nothing new
        ring.close()
    trained = service.handle("status", {"dataset": "train"})["trained_records"]
    assert trained == 2 + 3 + (4 if ring is not None else 0)


def test_reports_held_by_a_seal_are_answered_sealing_on_both_answered_paths_until_it_lapses(tmp_path):
    now = [0.0]
    service = _service(tmp_path, clock=lambda: now[0])
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    service.handle("seal", {"checkpoint_step": 5, "worker": "chief"})
    packed = ("w0", "train", shard["shard_id"], 2, shard["lease"], shard["start"])
    assert service.report_batch([packed]) == [(True, shard["lease_floor"])]
    json_reply = service.handle("report", {"dataset": "train", "worker": "w0", "shard_id": shard["shard_id"],
                                           "consumed": 2, "lease": shard["lease"], "offset": shard["start"]})
    assert json_reply["sealing"] is True
    assert service.handle("status", {"dataset": "train"})["trained_records"] == 0
    now[0] = service.seal_timeout_secs + 1  # the chief never committed
    assert service.report_batch([packed]) == [(False, shard["lease_floor"])] and service.phase == sp.Open()
    assert service.handle("status", {"dataset": "train"})["trained_records"] == 2


def test_a_packed_report_with_a_negative_field_is_refused_naming_it(tmp_path):
    service = _service(tmp_path)
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    [refused] = service.report_batch([("w0", "train", shard["shard_id"], -1, shard["lease"], shard["start"])])
    assert "field 'consumed' must be an int >= 0; got -1" in str(refused)
