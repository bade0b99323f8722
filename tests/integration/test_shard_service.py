"""The shard service over real gRPC on loopback: protocol, token, seals on disk, concurrency."""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading

import pytest
import tensorflow as tf

import elastimator as est
from elastimator.data import Column, DataSetInput, DataSetSpec, FileReader
from elastimator.elastic.feed import ShardFeed, ShardReportHook
from elastimator.elastic.sharded_input import ShardedInput
from elastimator.elastic.seal_store import SealStore
from elastimator.elastic.client import ShardClient
from elastimator.elastic.service import ShardServer, ShardService
from elastimator.elastic.shards import (SHARD_TAG, Assigned, LeaseTakenBackError, ShardingSpec, ShardBook,
                                        ShardServiceError, UnknownDataSetError, Wait)

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKEN = "job-token-123"


@pytest.fixture
def server(tmp_path):
    server = ShardServer(ShardService(TOKEN, SealStore(str(tmp_path)))).start()
    yield server
    server.stop()


def test_protocol_round_trip_and_seals_on_disk(server, tmp_path):
    client = ShardClient(server.address, TOKEN, worker="w0")
    assert server.address.startswith("127.0.0.1:")  # loopback unless configured
    client.add_dataset(ShardingSpec(name="train", size=10, shard_size=4))
    first = client.request("train")
    assert isinstance(first, Assigned) and (first.start, first.end) == (0, 4)
    client.report("train", first.shard_id, 4, offset=first.start)
    seal = client.seal()
    client.commit(seal, checkpoint_step=50)
    saved = json.load(open(tmp_path / "shards" / "seal-50.json"))
    assert saved["checkpoint_step"] == 50
    assert client.status("train")["trained_records"] == 4

    # The service restarts mid-epoch: a new one resumes from the last committed seal.
    server.stop()
    resumed = ShardService(TOKEN, SealStore(str(tmp_path)))
    assert resumed.resume(checkpoint_step=50)
    again = ShardServer(resumed).start()
    try:
        client = ShardClient(again.address, TOKEN, worker="w1")
        assert client.status("train")["trained_records"] == 4
        # Resumed, it hands out nothing until the chief says the model is back at that checkpoint.
        assert isinstance(client.request("train"), Wait)
        client.open()
        second = client.request("train")
        assert (second.start, second.end) == (4, 8)
    finally:
        again.stop()


@pytest.mark.parametrize("report_line", [True, False], ids=["report_line", "grpc"])
def test_bad_token_unknown_dataset_and_foreign_shard_are_clear_errors(server, report_line):
    """Refusals reach the worker as the book's own error classes, over either transport (not as text to match)."""
    ShardClient(server.address, TOKEN, worker="w0").add_dataset(ShardingSpec(name="train", size=8, shard_size=4))
    with pytest.raises(ShardServiceError, match="UNAUTHENTICATED: missing or wrong job token"):
        ShardClient(server.address, "wrong", worker="w0").request("train")
    owner = ShardClient(server.address, TOKEN, worker="w0", report_line=report_line)
    with pytest.raises(UnknownDataSetError, match="NOT_FOUND: unknown data set 'eval'"):
        owner.request("eval")
    shard = owner.request("train")
    stranger = ShardClient(server.address, TOKEN, worker="w9", report_line=report_line)
    with pytest.raises(LeaseTakenBackError, match="ABORTED: worker 'w9' reported shard"):
        stranger.report("train", shard.shard_id, 1, offset=shard.start)
    with pytest.raises(ShardServiceError, match="FAILED_PRECONDITION: .* reported 9 records of shard"):
        owner.report("train", shard.shard_id, 9, lease=shard.lease, offset=shard.start)
    owner.report("train", shard.shard_id, 1, lease=shard.lease, offset=shard.start)
    assert owner.reports_over_line == (1 if report_line else 0)  # the transport the refusals came over


def test_reports_wait_while_the_chief_saves(server):
    """Between seal and commit, other workers' reports are held, so none trains a batch the seal misses."""
    server.service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4}})
    chief = ShardClient.in_process(server.service, "chief-0")
    worker = ShardClient(server.address, TOKEN, worker="worker-0")
    shard = worker.request("train")
    seal = chief.seal(checkpoint_step=10)
    reporting = threading.Thread(target=worker.report, args=("train", shard.shard_id, 2),
                                 kwargs={"lease": shard.lease, "offset": shard.start})
    reporting.start()
    reporting.join(timeout=0.5)
    assert reporting.is_alive() and chief.status("train")["trained_records"] == 0
    own = chief.request("train")
    chief.report("train", own.shard_id, 1, offset=own.start)  # the chief's own reports are not held by its seal
    chief.commit(seal, checkpoint_step=10)
    reporting.join(timeout=5)
    assert not reporting.is_alive() and chief.status("train")["trained_records"] == 3


def test_workers_hear_of_a_rewind_before_the_chief_restores(server):
    server.service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4}})
    chief = ShardClient.in_process(server.service, "chief-0")
    workers = [ShardClient(server.address, TOKEN, worker=f"worker-{i}") for i in range(2)]
    leases = [w.request("train").lease for w in workers]
    assert all(ShardBook.is_current(lease, w.lease_floor) for lease, w in zip(leases, workers))
    idle = ShardClient(server.address, TOKEN, worker="worker-2")
    idle.heartbeat()  # alive, but holds no shard: it has nothing stale to drop
    chief.commit(chief.seal(checkpoint_step=5), checkpoint_step=5)
    chief.restore(5)
    assert chief.unheard() == ["worker-0", "worker-1"]
    workers[0].heartbeat()
    assert chief.unheard() == ["worker-1"]
    assert not ShardBook.is_current(leases[0], workers[0].lease_floor)  # its held batches are now stale
    assert ShardBook.is_current(leases[1], workers[1].lease_floor)  # not yet told
    idle.close()


def _counting_model_fn(features, labels, mode):
    """Counts how often each record id is trained, in a variable only a step's writes change."""
    trained = tf.compat.v1.get_variable("trained", [40], tf.int64, tf.compat.v1.zeros_initializer(),
                                        trainable=False, use_resource=True)
    weight = tf.compat.v1.get_variable("w", [], tf.float32, tf.compat.v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(weight - tf.cast(labels, tf.float32)))
    step = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    count = trained.scatter_add(tf.IndexedSlices(tf.ones_like(features["id"], tf.int64), features["id"]))
    return est.EstimatorSpec(mode, loss=loss, train_op=tf.group(step, count))


class _RewindAfterFirstCall(tf.compat.v1.train.SessionRunHook):
    """After the first training call: keeps what it trained (`before`), then rewinds the book to seal 0 (as a ps
    failure does) and lets the worker hear of it, while the rest of the first shard waits in the prefetch buffer."""

    def __init__(self, chief, worker):
        self._chief, self._worker = chief, worker
        self.before = None

    def begin(self):
        self._trained = next(v for v in tf.compat.v1.global_variables() if v.op.name == "trained").value()

    def after_run(self, run_context, run_values):
        if self.before is None:
            self.before = run_context.session.run(self._trained)
            self._chief.restore(0)
            self._worker.heartbeat()


@pytest.mark.parametrize("steps_per_execution", [1, 5])
def test_batches_of_a_lease_taken_back_while_they_waited_are_not_trained(server, tmp_path, steps_per_execution):
    """One step per call: the write gate withdraws each stale batch; several: the input drops them as the loop
    takes them. Either way the rewound shards are trained again whole, under new leases, and nothing else twice."""
    data = tmp_path / "ids.csv"
    data.write_text("".join(f"{i},0\n" for i in range(40)))
    columns = (Column.create("id", "int"), Column.create("label", "int", is_label=True))
    spec = DataSetSpec(reader=FileReader(str(data)), columns=columns, batch_size=5)
    chief = ShardClient.in_process(server.service, "chief-0")
    worker = ShardClient(server.address, TOKEN, worker="worker-0")
    feed = ShardFeed(worker, ShardingSpec(name="train", size=40, shard_size=20)).start()
    chief.commit(chief.seal(checkpoint_step=0), checkpoint_step=0)
    rewind = _RewindAfterFirstCall(chief, worker)
    model_dir = str(tmp_path / "model")
    # No summaries or step counter: each acts on the first step (as in tf.estimator 2.15), which would make the
    # first call one step long; this test wants a first call of steps_per_execution steps.
    estimator = est.Estimator(_counting_model_fn, model_dir=model_dir, config=est.RunConfig(
        steps_per_execution=steps_per_execution, save_summary_steps=None, log_step_count_steps=None))
    # The rewound shards come back to this process's input, or, where it had already been told that every
    # shard was out, to its next training (as a re-created session's input would ask again).
    for hooks in ([rewind], []):
        estimator.train(ShardedInput(spec, feed), hooks=[ShardReportHook.step_hook(feed), *hooks])
    trained = estimator.get_variable_value("trained")
    assert rewind.before.sum() == 5 * steps_per_execution  # the first call's batches, trained before the rewind
    # those once more after it, every other record once
    assert (trained == 1 + rewind.before).all(), (trained, rewind.before)


@pytest.mark.slow
def test_64_concurrent_clients_lose_nothing(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    from shard_service_load import run_load  # the same driver the load benchmark times

    server = ShardServer(ShardService(TOKEN), max_workers=64).start()
    try:
        latencies = run_load(server.address, TOKEN, clients=64, shards=10_000)  # asserts none lost or doubled
    finally:
        server.stop()
    assert len(latencies) >= 20_000  # every shard requested and reported once, plus the final requests


@pytest.mark.slow
@pytest.mark.parametrize("load, line", [("python", "native"), ("c", "native"), ("c", "python")])
def test_hundreds_of_workers_stepping_with_seals_and_a_kill_leave_the_book_exact(monkeypatch, tmp_path, load, line):
    """240 simulated workers (bench/shard_service_scale.py's, over the real report line; its Python load processes
    and its C ones) at 10 steps/s against the standalone service (its line's native loop, and its Python one),
    the chief sealing every second, a quarter of them killed half way: the data set finishes with every record
    counted once, the killed workers' shards trained by the others."""
    from elastimator.elastic import report_line_server

    if line == "native" and report_line_server._line_native is None:  # pylint: disable=protected-access
        pytest.skip("the native report line was not built here (no C compiler, or not Linux)")
    monkeypatch.setenv("ELASTIMATOR_NATIVE_LINE", "1" if line == "native" else "0")
    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    from shard_service_scale import build_c_load, run  # the benchmark's own driver

    binary = build_c_load(str(tmp_path)) if load == "c" else None
    if load == "c" and binary is None:
        pytest.skip("no C compiler to build bench/report_load.c")
    result = run(workers=240, processes=4, step_rate=10, batch=16, shard_steps=10, seconds=6, seal_every=1,
                 kill_share=0.25, worker_timeout_secs=3, pin=False, load=binary)
    assert result["killed_workers"] == 60
    assert result["book"] == {**result["book"], "finished": True, "trained_records": result["records"],
                              "exact": True}, result
    assert result["seal_commit_ms"]["count"] >= 3  # the chief sealed while the workers stepped


@pytest.mark.parametrize("steps_per_execution", [1, 5])
def test_standalone_shard_service_feeds_a_local_job(tmp_path, monkeypatch, steps_per_execution):
    from elastimator.job.conf import JobConf
    from elastimator.job.executor import run_job
    from tests.unit.test_executor_and_progress import COLUMNS, IrisReader, inner_model_fn

    with _standalone_service(tmp_path) as (_, address):
        monkeypatch.setenv("ELASTIMATOR_SHARD_SERVICE", address)
        monkeypatch.setenv("ELASTIMATOR_JOB_TOKEN", TOKEN)
        monkeypatch.setenv("ELASTIMATOR_SHARD_SERVICE_STANDALONE", "1")
        conf = JobConf.from_object({
            "classifier_class": inner_model_fn, "model_dir": str(tmp_path), "batch_size": 25,
            # With 5 steps per call the input ends inside the third call, after its first 2 steps.
            "steps_per_execution": steps_per_execution,
            "train_set": {"reader": IrisReader(), "columns": COLUMNS, "epoch": 2, "shard_size": 50},
        })
        result = run_job(conf, show_progress=False)
        assert result.global_step == 12  # 150 records x 2 epochs / 25, each batch once
        status = ShardClient(address, TOKEN, worker="observer").status("train_set")
        assert status["finished"] and status["trained_records"] == 300
        assert sorted(os.listdir(tmp_path / "shards"))  # seals committed with the checkpoints


@contextlib.contextmanager
def _standalone_service(model_dir):
    """`elastimator shard-service` over `model_dir`, as (its process, its address); it must stop cleanly."""
    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    with tempfile.TemporaryFile("w+") as log:  # a file, not a pipe: a job's worth of log lines never blocks it
        service = subprocess.Popen([cli, "shard-service", "--model-dir", str(model_dir)], stdout=subprocess.PIPE,
                                   stderr=log, text=True,
                                   env=dict(os.environ, ELASTIMATOR_JOB_TOKEN=TOKEN, TF_CPP_MIN_LOG_LEVEL="2"))
        try:
            address = service.stdout.readline().strip()
            assert address.startswith("127.0.0.1:"), log.seek(0) or log.read()
            yield service, address
        finally:
            service.terminate()
            assert service.wait(timeout=30) == 0


def test_the_standalone_service_runs_without_tensorflow_and_resumes_the_checkpoint_the_state_file_names(tmp_path):
    """`elastimator shard-service` holds a book of integers: no TensorFlow in the process (a few tens of MB, where
    TensorFlow made it ~580 MB), and it resumes from the seal of the checkpoint the job resumes from."""
    writer = ShardServer(ShardService(TOKEN, SealStore(str(tmp_path)))).start()
    try:
        client = ShardClient(writer.address, TOKEN, worker="w0")
        client.add_dataset(ShardingSpec(name="train", size=100, shard_size=10))
        for step in (40, 80):
            shard = client.request("train")
            client.report("train", shard.shard_id, 10, offset=shard.start)
            client.commit(client.seal(), checkpoint_step=step)
            (tmp_path / f"model.ckpt-{step}.index").write_bytes(b"")
    finally:
        writer.stop()
    # Rolled back to 40 (tf.estimator's state file decides which checkpoint is restored).
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-40"\n'
                                         'all_model_checkpoint_paths: "model.ckpt-40"\n')
    with _standalone_service(tmp_path) as (service, address):
        status = ShardClient(address, TOKEN, worker="observer").status("train")
        assert status["trained_records"] == 10  # seal 40's book, not 80's
        with open(f"/proc/{service.pid}/maps") as maps:
            loaded = maps.read()
        assert "tensorflow" not in loaded, [line for line in loaded.splitlines() if "tensorflow" in line][:3]
        with open(f"/proc/{service.pid}/status") as proc_status:
            rss_mb = next(int(line.split()[1]) for line in proc_status if line.startswith("VmRSS")) / 1024
        print(f"standalone shard service: {rss_mb:.0f} MB resident")
        assert rss_mb < 100


def test_the_standalone_service_stops_cleanly_whenever_the_stop_comes(tmp_path):
    """A SIGTERM right as the service has said where it listens (the moment its wait for a stop begins): it
    stops, exit code 0, every time. (Its handler once set an Event the main thread could be holding the lock of.)"""
    for i in range(8):
        with _standalone_service(tmp_path / str(i)):
            pass  # _standalone_service terminates it at once, and asserts it exits 0 within 30 s


def test_max_bad_records_is_a_job_wide_count_of_distinct_records(server):
    """Two workers each meet 3 of 4 malformed lines (one line in both: a replayed batch); the limit is 3."""
    from elastimator.data.parsing import BadRecordTally
    from elastimator.errors import ReaderError

    def tally(worker):
        feed = ShardFeed(ShardClient(server.address, TOKEN, worker=worker),
                         ShardingSpec(name="train", size=100, shard_size=10))
        feed.client.add_dataset(feed.dataset)
        return BadRecordTally(3, ["data.csv"], shared=feed.report_bad)

    def meet(tally, lines):
        n = len(lines)
        tally.record([0] * n, lines, [1] * n, [True] * n, [0] * n, [b"x"] * n, 2, ["id", "label"], ["int", "float"])

    first, second = tally("worker-0"), tally("worker-1")
    meet(first, [4, 8])
    meet(second, [8, 15])  # line 8 again: still 3 distinct, within the limit
    assert (first.count, second.count, second.job_count) == (2, 2, 3)
    with pytest.raises(ReaderError, match=r"4 malformed record\(s\) in 'train' across the job, more than "
                                          r"max_bad_records=3\. First ones: data.csv:4: expected 2 fields, got 1"):
        meet(first, [16])
    # Every other worker is stopped on its next request, with the same reason.
    other = ShardFeed(ShardClient(server.address, TOKEN, worker="worker-2"), ShardingSpec(name="train", size=100,
                                                                                          shard_size=10))
    with pytest.raises(ReaderError, match="across the job, more than max_bad_records=3.*Fix the data"):
        next(other.batches(None, 10))


def test_an_input_re_created_with_its_session_gets_back_what_the_old_one_held(server, tmp_path):
    """After a ps failure every trainer's session (and input iterator) is re-created: the shards the old
    iterator held must go back, or they stay out with no one to train them and every trainer waits."""
    data = tmp_path / "ids.csv"
    data.write_text("".join(f"{i}\n" for i in range(40)))
    reader = FileReader(str(data))
    feed = ShardFeed(ShardClient(server.address, TOKEN, worker="w0"),
                     ShardingSpec(name="train", size=40, shard_size=20))
    feed.client.add_dataset(feed.dataset)
    old = feed.batches(reader, 10)
    numbers, _, tag = next(old)  # the old iterator holds shard [0, 20) and has handed out one batch of it
    assert list(numbers) == list(range(1, 11))
    trained = [n for numbers, _, _ in feed.batches(reader, 10) for n in numbers]
    assert sorted(trained) == list(range(1, 41))  # the new iterator trains all of it, [0, 20) included
    with pytest.raises(StopIteration):
        next(old)  # a newer iterator runs: the old one stops, and gives back anything it was handed meanwhile
    assert server.service.book.status("train")["doing_shards"] == 2 and not server.service.book.holds("w1")


def test_a_malformed_record_of_an_elastic_input_is_named_by_its_file_and_line(tmp_path):
    """The elastic input reads a shard's batch as one block of text; where each record is (file, line, headers
    counted) is worked out from the batch's range, for the bad records' messages."""
    (tmp_path / "a.csv").write_text("id,label\n" + "".join(f"{i},0\n" if i != 7 else "7,0,0\n" for i in range(20)))
    (tmp_path / "b.csv").write_text("".join(f"{i},0\n" if i != 27 else "27\n" for i in range(20, 40)))
    columns = (Column.create("id", "int"), Column.create("label", "int", is_label=True))
    spec = DataSetSpec(reader=FileReader(str(tmp_path / "*.csv")), columns=columns, batch_size=5, max_bad_records=5)
    feed = ShardFeed(ShardClient.in_process(ShardService(TOKEN), "w0"),
                     ShardingSpec(name="train", size=40, shard_size=20), heartbeat_secs=60).start()
    data = ShardedInput(spec, feed)
    try:
        assert sum(1 for _ in data()) == 8
    finally:
        feed.stop()
    assert sorted(data.tally.examples) == [f"{tmp_path / 'a.csv'}:9: expected 2 fields, got 3",
                                           f"{tmp_path / 'b.csv'}:8: expected 2 fields, got 1"]


def test_an_elastic_input_reads_several_batches_at_once_and_tags_each(tmp_path):
    """A FileReader's shard is read a block of several batches at a time (here all of it: the records are short)
    and split into batches in the pipeline; each batch has its own range in its tag, across files and headers."""
    (tmp_path / "a.csv").write_text("id,label\n" + "".join(f"{i},0\n" for i in range(7)))
    (tmp_path / "b.csv").write_text("".join(f"{i},0\n" for i in range(7, 13)))
    columns = (Column.create("id", "int"), Column.create("label", "int", is_label=True))
    spec = DataSetSpec(reader=FileReader(str(tmp_path / "*.csv")), columns=columns, batch_size=3)
    feed = ShardFeed(ShardClient.in_process(ShardService(TOKEN), "w0"),
                     ShardingSpec(name="train", size=13, shard_size=10), heartbeat_secs=60).start()
    try:
        batches = [(element.features["id"].numpy().tolist(), element.step_outputs[SHARD_TAG].numpy().tolist())
                   for element in ShardedInput(spec, feed)()]
    finally:
        feed.stop()
    # Shards [0, 10) and [10, 13), in either order; batches of 3 from each shard's start, [6, 9) spanning both files.
    batches.sort(key=lambda batch: batch[1][2])
    assert [ids for ids, _ in batches] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9], [10, 11, 12]]
    assert [(shard, first, records) for _, (shard, _, first, records) in batches] == [
        (0, 0, 3), (0, 3, 3), (0, 6, 3), (0, 9, 1), (1, 10, 3)]
