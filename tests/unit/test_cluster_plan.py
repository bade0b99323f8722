"""Cluster plans: addresses and TF_CONFIGs for a launched job, and ports that are taken."""

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from elastimator.cluster.launcher import LaunchSpec, request_scale, scale_request_path, state_path
from elastimator.cluster.plan import ClusterPlan, Task
from elastimator.errors import ClusterError
from elastimator.estimator.contract.tf_config import parse_cluster


def test_every_task_gets_a_distinct_port_and_a_parsable_tf_config():
    plan = ClusterPlan.allocate(ps=2, max_workers=3)
    addresses = [*plan.ps, plan.chief, *plan.worker_slots, plan.shard_service]
    assert len(set(addresses)) == 7 and all(a.startswith("127.0.0.1:") for a in addresses)
    info = parse_cluster(plan.tf_config(Task("worker", 2)))
    assert (info.task_type, info.task_id, info.num_ps_replicas) == ("worker", 2, 2)
    assert info.cluster_spec.as_dict()["worker"] == list(plan.worker_slots)
    assert parse_cluster(plan.tf_config(Task("evaluator"))).task_type == "evaluator"
    assert len(plan.token) == 32


def test_ports_are_drawn_below_the_ephemeral_range():
    # A socket bound to port 0 (the chief's report line, a gRPC client) must never take a task's port before
    # the task binds it: the kernel hands those out only from the ephemeral range.
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    plan = ClusterPlan.allocate(ps=2, max_workers=8)
    ports = [int(a.rsplit(":", 1)[1]) for a in (*plan.ps, plan.chief, *plan.worker_slots, plan.shard_service)]
    assert len(set(ports)) == 12 and all(1024 <= p < low for p in ports)


def test_a_port_in_use_is_named():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ClusterError, match=r"port\(s\) [\d, ]+ on 127.0.0.1 are in use") as refused:
            ClusterPlan.allocate(ps=1, max_workers=1, base_port=port)
    # Another process on a busy machine may hold a port of the range as well; the one held here must be named.
    named = re.search(r"port\(s\) ([\d, ]+) on", str(refused.value)).group(1).split(", ")
    assert str(port) in named


def test_out_of_range_requests_are_refused(tmp_path):
    with pytest.raises(ClusterError, match="at least 1 ps"):
        ClusterPlan.allocate(ps=0, max_workers=1)
    with pytest.raises(ClusterError, match="outside this job's 1 worker slot"):
        ClusterPlan.allocate(ps=1, max_workers=1).tf_config(Task("worker", 1))
    with pytest.raises(ClusterError, match="--max-workers \\(1\\) must be at least --workers \\(2\\)"):
        LaunchSpec("c.py", str(tmp_path), workers=2, max_workers=1)
    with pytest.raises(ClusterError, match="is `elastimator launch` running"):
        request_scale(str(tmp_path), 2)


def test_scale_says_so_when_the_launcher_was_killed(tmp_path):
    """A launcher killed with SIGKILL leaves a state file that says running: its pid is what tells."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    os.makedirs(os.path.dirname(state_path(str(tmp_path))))
    with open(state_path(str(tmp_path)), "w") as f:
        json.dump({"running": True, "launcher_pid": int(gone.stdout), "workers": 1, "max_workers": 2}, f)
    with pytest.raises(ClusterError, match="is not running"):
        request_scale(str(tmp_path), 2)
    assert not os.path.exists(scale_request_path(str(tmp_path)))
    with open(state_path(str(tmp_path)), "w") as f:
        json.dump({"running": True, "launcher_pid": os.getpid(), "workers": 1, "max_workers": 2}, f)
    request_scale(str(tmp_path), 2)
    assert os.path.exists(scale_request_path(str(tmp_path)))
