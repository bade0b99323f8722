"""Cluster plumbing errors: an occupied ps port, a ps that never comes up."""

import logging
import socket
import time

import pytest

import elastimator as est
from elastimator import ClusterError
from elastimator.estimator.loops import sessions
from elastimator.train_eval import servers


def _listening_socket():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_ps_that_cannot_bind_its_port_names_the_fix():
    held = _listening_socket()
    try:
        address = f"127.0.0.1:{held.getsockname()[1]}"
        config = est.RunConfig(tf_config={"cluster": {"ps": [address], "chief": ["127.0.0.1:1"]},
                                          "task": {"type": "ps", "index": 0}})
        with pytest.raises(ClusterError, match=f"ps task 0 could not start its server on {address}.*free port"):
            servers.start_server(config)
    finally:
        held.close()


def test_worker_waits_for_an_unreachable_ps_then_gives_up_clearly(caplog):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{free.getsockname()[1]}"
    free.close()  # nothing listens there
    config = est.RunConfig(tf_config={"cluster": {"ps": [address], "chief": ["127.0.0.1:2"], "worker": ["h:3"]},
                                      "task": {"type": "worker", "index": 0}})
    with caplog.at_level(logging.INFO, logger="elastimator"):
        with pytest.raises(ClusterError, match=rf"gave up after 2s waiting for /job:ps/task:0 \({address}\)"):
            sessions.wait_for_tasks(config, "ps", timeout_secs=2, log_every_secs=0.5)
    assert any("Waiting for /job:ps/task:0" in r.message for r in caplog.records)


def test_reachable_ps_returns_at_once(caplog):
    held = _listening_socket()
    try:
        address = f"127.0.0.1:{held.getsockname()[1]}"
        config = est.RunConfig(tf_config={"cluster": {"ps": [address], "chief": ["127.0.0.1:2"]},
                                          "task": {"type": "chief", "index": 0}})
        with caplog.at_level(logging.INFO, logger="elastimator"):
            sessions.wait_for_tasks(config, "ps", timeout_secs=5, log_every_secs=0)
        assert not [r for r in caplog.records if "Waiting for" in r.message]  # found on the first look
    finally:
        held.close()


def test_a_worker_the_job_finished_without_exits_and_one_still_training_does_not():
    now = {"t": 100.0}
    done = {"at": None}
    hook = servers.StrandedWorkerExit(lambda: done["at"], idle_secs=60, clock=lambda: now["t"])
    now["t"] += 300
    assert not hook.stranded()  # idle, but the chief has not finished: waiting for the job is right
    done["at"] = time.time() - 3600
    assert not hook.stranded()  # a marker from before this worker started belongs to an earlier run
    done["at"] = time.time() + 1
    hook.after_run(None, None)
    now["t"] += 30
    assert not hook.stranded()  # the chief is done, but this worker still trains its last shards
    now["t"] += 31
    assert hook.stranded()

    exits = []
    watcher = servers.StrandedWorkerExit(lambda: done["at"], idle_secs=0, poll_secs=0.01, exit_process=exits.append)
    watcher.begin()
    for _ in range(3000):
        if exits:
            break
        time.sleep(0.01)
    watcher.end(None)
    assert exits == [0]
