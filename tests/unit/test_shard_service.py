"""The shard service in process: its handlers, liveness and seals, with a number for a clock (no gRPC)."""

import concurrent.futures
import logging
import os
import threading

import pytest

from elastimator.elastic.client import ShardClient
from elastimator.elastic.feed import ShardFeed, ShardReportHook
from elastimator.elastic.service_config import report_port_from
from elastimator.elastic.report_ring import ReportRing, RingReader
from elastimator.elastic.seal_store import SealStore
from elastimator.elastic.service import METHODS, ShardService
from elastimator.elastic.shards import ShardingSpec, ShardServiceError
from elastimator.errors import ReaderError
from elastimator.estimator.step.training_step import TrainingStep

TOKEN = "job-token-123"


def test_every_protocol_method_has_a_handler_and_nothing_else_is_callable():
    service = ShardService(TOKEN)
    assert set(service._handlers) == set(METHODS)  # pylint: disable=protected-access
    for method in ("_request", "__init__", "resume", "reap", "handle"):
        with pytest.raises(ShardServiceError, match=f"unknown method {method!r}; expected one of"):
            service.handle(method, {})


def test_shards_wait_after_a_resume_until_the_chief_opens_the_service(tmp_path):
    first = ShardService(TOKEN, SealStore(str(tmp_path)))
    first.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4}})
    seal = first.handle("seal", {"checkpoint_step": 10, "worker": "chief-0"})["seal_id"]
    first.handle("commit", {"seal_id": seal, "checkpoint_step": 10, "worker": "chief-0"})
    resumed = ShardService(TOKEN, SealStore(str(tmp_path)))
    assert resumed.resume(checkpoint_step=10)
    assert resumed.handle("request", {"dataset": "train", "worker": "w0"})["decision"] == "wait"
    resumed.handle("open", {"worker": "chief-0"})
    assert resumed.handle("request", {"dataset": "train", "worker": "w0"})["decision"] == "assigned"


def test_a_report_hook_needs_an_input_that_declares_shard_tags():
    feed = ShardFeed(ShardClient.in_process(ShardService(TOKEN), "w0"), ShardingSpec(name="t", size=4, shard_size=2))
    with pytest.raises(ReaderError, match="the input declares no shard tags; use a ShardedInput of the ShardFeed"):
        ShardReportHook(feed, TrainingStep(loss=None, global_step=None, outputs={}))


def test_corrupted_seal_file_refuses_to_start(tmp_path):
    store = SealStore(str(tmp_path))
    store.write(10, {"datasets": {}, "next_seal": 1})
    with open(store.path(10), "w") as f:
        f.write('{"checkpoint_step": 10, "state": ')
    with pytest.raises(ShardServiceError, match=f"seal file {store.path(10)} is corrupted.*Refusing to start"):
        ShardService(TOKEN, store).resume(checkpoint_step=10)


def test_silent_workers_are_reaped_and_their_shards_return():
    now = [0.0]
    service = ShardService(TOKEN, worker_timeout_secs=5, clock=lambda: now[0])
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 8}})
    assigned = service.handle("request", {"dataset": "train", "worker": "w0"})
    service.handle("report", {"dataset": "train", "worker": "w0", "shard_id": assigned["shard_id"], "consumed": 3,
                              "offset": assigned["start"]})
    now[0] = 4.0
    assert service.reap() == []
    now[0] = 10.0
    assert service.reap() == ["w0"]
    rest = service.handle("request", {"dataset": "train", "worker": "w1"})
    assert (rest["start"], rest["end"]) == (3, 8)


def test_a_seal_never_committed_stops_holding_reports_after_its_timeout():
    now = [0.0]
    service = ShardService(TOKEN, clock=lambda: now[0], seal_timeout_secs=10)
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 8}})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    report = {"dataset": "train", "worker": "w0", "shard_id": shard["shard_id"], "consumed": 2,
              "offset": shard["start"]}
    service.handle("seal", {"worker": "chief-0", "checkpoint_step": 5})  # and then the chief dies
    assert service.handle("report", report)["sealing"]
    now[0] = 11.0
    assert "sealing" not in service.handle("report", report)
    assert service.book.status("train")["trained_records"] == 2


@pytest.fixture
def ring():
    ring = ReportRing.create()
    if ring is None:
        pytest.skip("report rings live in /dev/shm")
    yield ring
    ring.close()


def test_workers_silent_together_are_reaped_together_in_one_warning(caplog):
    now = [0.0]
    service = ShardService(TOKEN, worker_timeout_secs=5, clock=lambda: now[0])
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 300, "shard_size": 10}})
    for i in range(30):
        service.handle("request", {"dataset": "train", "worker": f"w{i}"})
    now[0] = 4.0
    service.handle("heartbeat", {"worker": "w0"})
    now[0] = 8.0
    with caplog.at_level(logging.WARNING, logger="elastimator"):
        assert service.reap() == [f"w{i}" for i in range(1, 30)]
    assert [r.getMessage() for r in caplog.records] == [
        f"29 workers stopped heartbeating ({', '.join(f'w{i}' for i in range(1, 21))} and 9 more); 29 shard(s) "
        "went back to the queue."]
    assert service.handle("status", {"dataset": "train"})["doing_shards"] == 1  # w0's

def test_a_silent_workers_ring_is_read_before_its_shards_go_back(ring):
    now = [0.0]
    service = ShardService(TOKEN, worker_timeout_secs=5, clock=lambda: now[0])
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 8}})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    service.attach_ring("w0", RingReader.open(ring.path))
    ring.put("train", shard["shard_id"], shard["lease"], shard["start"], 3)  # its last words
    now[0] = 10.0
    assert service.reap() == ["w0"]
    rest = service.handle("request", {"dataset": "train", "worker": "w1"})
    assert (rest["start"], rest["end"]) == (3, 8)  # the 3 it reported are not handed out again


def test_a_seal_marks_the_other_rings_and_a_seal_never_committed_lets_them_go_after_its_timeout(ring):
    now = [0.0]
    service = ShardService(TOKEN, clock=lambda: now[0], seal_timeout_secs=10)
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 8}})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    service.attach_ring("w0", RingReader.open(ring.path))
    ring.put("train", shard["shard_id"], shard["lease"], shard["start"], 2)
    service.handle("seal", {"worker": "chief-0", "checkpoint_step": 5})  # and then the chief dies
    assert ring.sealing and service.book.status("train")["trained_records"] == 2  # in the seal
    ring.put("train", shard["shard_id"], shard["lease"], shard["start"] + 2, 2)
    service.drain_reports()
    assert service.book.status("train")["trained_records"] == 2  # held until the commit
    now[0] = 11.0
    service.drain_reports()
    assert not ring.sealing and service.book.status("train")["trained_records"] == 4


def test_what_the_service_refuses_leaves_no_trace():
    """Issue 15: a refused seal held reports for 30 s, a data set that failed validation stayed registered,
    and a retried report without an offset counted twice."""
    service = ShardService(TOKEN)
    with pytest.raises(ShardServiceError, match="seed must be an int"):
        service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4, "seed": "x"}})
    with pytest.raises(ShardServiceError, match="unknown data set 'train'"):
        service.handle("request", {"dataset": "train", "worker": "w0"})
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4}})
    with pytest.raises(ShardServiceError, match="checkpoint_step"):
        service.handle("seal", {"worker": "chief-0", "checkpoint_step": "ten"})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    report = {"dataset": "train", "worker": "w0", "shard_id": shard["shard_id"], "consumed": 2}
    with pytest.raises(ShardServiceError, match="field 'offset' must be an int >= 0"):
        service.handle("report", report)
    for _ in range(2):  # the retry of a report whose reply was lost
        assert "sealing" not in service.handle("report", {**report, "offset": shard["start"]})
    assert service.book.status("train")["trained_records"] == 2


def test_a_request_sent_again_gets_the_shard_it_was_handed():
    """A request whose reply was lost (a report line that broke, a deadline that passed) is sent again with
    the same id; a second shard would stay out with no one to train it."""
    service = ShardService(TOKEN)
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 40, "shard_size": 4}})
    ask = lambda request_id, worker="w0": service.handle(  # noqa: E731
        "request", {"dataset": "train", "worker": worker, "request_id": request_id})
    doing = lambda: service.book.status("train")["doing_shards"]  # noqa: E731
    first = ask("a-1")
    assert ask("a-1") == first and doing() == 1
    second = ask("a-2")
    assert second["shard_id"] != first["shard_id"] and doing() == 2
    assert ask("a-2", worker="w1")["shard_id"] != second["shard_id"] and doing() == 3  # ids are per worker
    service.handle("fail_worker", {"failed_worker": "w0"})
    assert ask("a-2")["lease"] != second["lease"]  # its shard went back: the request is answered anew
    with pytest.raises(ShardServiceError, match="field 'request_id' must be a non-empty string; got 7"):
        ask(7)
    without_id = lambda: service.handle("request", {"dataset": "train", "worker": "w2"})  # noqa: E731
    assert without_id()["shard_id"] != without_id()["shard_id"]  # an older client's: each one is new


def test_seal_store_keeps_the_newest(tmp_path):
    store = SealStore(str(tmp_path), keep=2)
    for step in (10, 20, 30):
        store.write(step, {"datasets": {}, "next_seal": 1})
    assert store.steps() == [20, 30]
    assert not os.path.exists(store.path(10))
    with pytest.raises(ShardServiceError, match="no seal for checkpoint step 10"):
        store.read(10)


def test_a_checkpoint_saved_just_before_a_crash_finds_its_pending_seal(tmp_path):
    service = ShardService(TOKEN, SealStore(str(tmp_path)))
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4}})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    service.handle("report", {"dataset": "train", "worker": "w0", "shard_id": shard["shard_id"], "consumed": 4,
                              "offset": shard["start"]})
    service.handle("seal", {"checkpoint_step": 124, "worker": "chief"})  # the chief dies before committing
    resumed = ShardService(TOKEN, SealStore(str(tmp_path)))
    assert resumed.resume(checkpoint_step=124)
    assert resumed.handle("status", {"dataset": "train"})["trained_records"] == 4


@pytest.mark.parametrize("text, port", [(None, 0), ("", 0), ("2224", 2224), ("off", None), (" OFF ", None)])
def test_the_report_line_port_is_a_number_or_off(text, port):
    assert report_port_from(text) == port


def test_a_report_line_port_that_is_neither_is_a_clear_error():
    with pytest.raises(ReaderError, match=r"ELASTIMATOR_SHARD_REPORT_PORT \(or --report-port\): expected a port "
                                          r"number .* or 'off'; got 'no'"):
        report_port_from("no")



class _SlowDisk(SealStore):
    """A seal store whose pending writes wait for `go` (a slow disk), or fail (a full one)."""

    def __init__(self, directory, fail=False):
        super().__init__(directory)
        self.writing, self.go, self.fail = threading.Event(), threading.Event(), fail

    def write_pending(self, step, state):
        self.writing.set()
        self.go.wait(timeout=30)
        if self.fail:
            raise OSError(28, "No space left on device")
        super().write_pending(step, state)


def _reporting_worker(service):
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 64, "shard_size": 8}})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    return lambda offset: service.handle("report", {"dataset": "train", "worker": "w0", "shard_id": shard["shard_id"],
                                                    "consumed": 1, "lease": shard["lease"], "offset": offset})


def test_a_seal_writes_its_file_without_holding_the_book(tmp_path):
    disk = _SlowDisk(str(tmp_path))
    service = ShardService(TOKEN, disk)
    report = _reporting_worker(service)
    sealing = concurrent.futures.ThreadPoolExecutor(1).submit(
        service.handle, "seal", {"checkpoint_step": 5, "worker": "chief"})
    assert disk.writing.wait(timeout=30)
    # While the file is written, the book answers: a report is held by the seal, as until any commit ...
    assert report(0) == {"sealing": True, "lease_floor": service.book.lease_floor}
    assert service.handle("status", {"dataset": "train"})["trained_records"] == 0
    assert not sealing.done()  # ... and the chief is answered once its file is on disk
    disk.go.set()
    seal_id = sealing.result(timeout=30)["seal_id"]
    assert disk.any_for(5)
    service.handle("commit", {"seal_id": seal_id, "checkpoint_step": 5, "worker": "chief"})
    assert "sealing" not in report(0) and disk.read(5)["datasets"]["train"]["trained_records"] == 0


def test_a_seal_whose_file_cannot_be_written_fails_and_holds_no_report(tmp_path):
    disk = _SlowDisk(str(tmp_path), fail=True)
    disk.go.set()
    service = ShardService(TOKEN, disk)
    report = _reporting_worker(service)
    with pytest.raises(OSError, match="No space left"):
        service.handle("seal", {"checkpoint_step": 5, "worker": "chief"})
    assert "sealing" not in report(0)
    assert service.handle("status", {"dataset": "train"})["trained_records"] == 1
