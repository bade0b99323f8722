"""The shard service over real gRPC on loopback: protocol, token, seals on disk, concurrency."""

import json
import os

import pytest

from elastimator.elastic.seal_store import SealStore
from elastimator.elastic.service import ShardClient, ShardServer, ShardService
from elastimator.elastic.shards import Assigned, DatasetSpec, ShardServiceError, Wait

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
    client.add_dataset(DatasetSpec(name="train", size=10, shard_size=4))
    first = client.request("train")
    assert isinstance(first, Assigned) and (first.start, first.end) == (0, 4)
    client.report("train", first.shard_id, 4)
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


def test_bad_token_unknown_dataset_and_foreign_shard_are_clear_errors(server):
    ShardClient(server.address, TOKEN, worker="w0").add_dataset(DatasetSpec(name="train", size=8, shard_size=4))
    with pytest.raises(ShardServiceError, match="UNAUTHENTICATED: missing or wrong job token"):
        ShardClient(server.address, "wrong", worker="w0").request("train")
    owner = ShardClient(server.address, TOKEN, worker="w0")
    with pytest.raises(ShardServiceError, match="NOT_FOUND: unknown data set 'eval'"):
        owner.request("eval")
    shard = owner.request("train")
    with pytest.raises(ShardServiceError, match="FAILED_PRECONDITION: worker 'w9' reported shard"):
        ShardClient(server.address, TOKEN, worker="w9").report("train", shard.shard_id, 1)


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
    service.handle("report", {"dataset": "train", "worker": "w0", "shard_id": assigned["shard_id"], "consumed": 3})
    now[0] = 4.0
    assert service.reap() == []
    now[0] = 10.0
    assert service.reap() == ["w0"]
    rest = service.handle("request", {"dataset": "train", "worker": "w1"})
    assert (rest["start"], rest["end"]) == (3, 8)


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


def test_seal_store_keeps_the_newest(tmp_path):
    store = SealStore(str(tmp_path), keep=2)
    for step in (10, 20, 30):
        store.write(step, {"datasets": {}, "next_seal": 1})
    assert store.steps() == [20, 30]
    assert not os.path.exists(store.path(10))
    with pytest.raises(ShardServiceError, match="no seal for checkpoint step 10"):
        store.read(10)


def test_standalone_shard_service_feeds_a_local_job(tmp_path, monkeypatch):
    import subprocess
    import sys

    from elastimator.job.conf import JobConf
    from elastimator.job.executor import run_job
    from tests.unit.test_executor_and_progress import COLUMNS, IrisReader, inner_model_fn

    cli = os.path.join(os.path.dirname(sys.executable), "elastimator")
    env = dict(os.environ, ELASTIMATOR_JOB_TOKEN=TOKEN, TF_CPP_MIN_LOG_LEVEL="2")
    service = subprocess.Popen([cli, "shard-service", "--model-dir", str(tmp_path)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        address = service.stdout.readline().strip()
        assert address.startswith("127.0.0.1:")
        monkeypatch.setenv("ELASTIMATOR_SHARD_SERVICE", address)
        monkeypatch.setenv("ELASTIMATOR_JOB_TOKEN", TOKEN)
        monkeypatch.setenv("ELASTIMATOR_SHARD_SERVICE_STANDALONE", "1")
        conf = JobConf.from_object({
            "classifier_class": inner_model_fn, "model_dir": str(tmp_path), "batch_size": 25,
            "train_set": {"reader": IrisReader(), "columns": COLUMNS, "epoch": 2, "shard_size": 50},
        })
        result = run_job(conf, show_progress=False)
        assert result.global_step == 12  # 150 records x 2 epochs / 25, each batch once
        status = ShardClient(address, TOKEN, worker="observer").status("train_set")
        assert status["finished"] and status["trained_records"] == 300
        assert sorted(os.listdir(tmp_path / "shards"))  # seals committed with the checkpoints
    finally:
        service.terminate()
        assert service.wait(timeout=30) == 0


def test_a_checkpoint_saved_just_before_a_crash_finds_its_pending_seal(tmp_path):
    service = ShardService(TOKEN, SealStore(str(tmp_path)))
    service.handle("add_dataset", {"dataset": {"name": "train", "size": 8, "shard_size": 4}})
    shard = service.handle("request", {"dataset": "train", "worker": "w0"})
    service.handle("report", {"dataset": "train", "worker": "w0", "shard_id": shard["shard_id"], "consumed": 4})
    service.handle("seal", {"checkpoint_step": 124, "worker": "chief"})  # the chief dies before committing
    resumed = ShardService(TOKEN, SealStore(str(tmp_path)))
    assert resumed.resume(checkpoint_step=124)
    assert resumed.handle("status", {"dataset": "train"})["trained_records"] == 4
