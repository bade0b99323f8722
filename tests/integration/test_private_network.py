"""A local job's TensorFlow servers cannot be reached from another host (issue 15, item 2).

Another host is played by a network namespace joined to this one by a veth pair, as a second machine on
the same network would be. Needs root (CI runs as root); skipped, saying why, where namespaces cannot be made.
"""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest

from elastimator.cluster.launcher import Launcher, LaunchSpec
from tests.integration.namespaces import free_subnet, link_name, namespace_name, remove_leftovers

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Console(list):
    def write(self, text):
        self.append(text)

    def flush(self):
        pass


def _ip(*args, namespace=None):
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return subprocess.run([*prefix, "ip", *args], capture_output=True, text=True)


@pytest.fixture
def other_host():
    """Connects from a network namespace linked to this one by a veth pair: `connect(port)` -> reached?"""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to make a network namespace that plays another host")
    remove_leftovers()
    namespace, here, there = namespace_name("probe"), link_name("h"), link_name("p")
    subnet = free_subnet(213)
    host_side, probe_side = f"{subnet}.1", f"{subnet}.2"
    steps = [(("netns", "add", namespace), None), (("link", "add", here, "type", "veth", "peer", "name", there), None),
             (("link", "set", there, "netns", namespace), None), (("addr", "add", f"{host_side}/24", "dev", here), None),
             (("link", "set", here, "up"), None), (("addr", "add", f"{probe_side}/24", "dev", there), namespace),
             (("link", "set", there, "up"), namespace), (("link", "set", "lo", "up"), namespace)]
    try:
        for args, inside in steps:
            result = _ip(*args, namespace=inside)
            if result.returncode != 0:
                pytest.skip(f"cannot make a network namespace here: ip {' '.join(args)}: {result.stderr.strip()}")

        def connect(port: int) -> bool:
            code = f"import socket; socket.create_connection(({host_side!r}, {port}), timeout=3)"
            return subprocess.run(["ip", "netns", "exec", namespace, sys.executable, "-c", code],
                                  capture_output=True).returncode == 0

        yield connect
    finally:
        _ip("link", "del", here)
        _ip("netns", "del", namespace)


def _reachable_here(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def test_the_servers_of_a_local_job_are_unreachable_from_another_host(tmp_path, monkeypatch, other_host):
    # The probe does reach this machine: a listener on every interface here answers it.
    with socket.socket() as exposed:
        exposed.bind(("0.0.0.0", 0))
        exposed.listen()
        assert other_host(exposed.getsockname()[1])

    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("a,b,c,d,species\n" + "5.1,3.5,1.4,0.2,0\n6.2,2.9,4.3,1.3,1\n" * 100)
    monkeypatch.setenv("TINY_DATA", str(data))
    monkeypatch.setenv("PYTHONPATH", ROOT)
    console = Console()
    tiny = os.path.join(ROOT, "tests", "integration", "tiny_conf.py") + ":TinyConf"
    launcher = Launcher(LaunchSpec(tiny, str(tmp_path / "model"), ps=1, workers=1, max_steps=100_000,
                                   network="private"), out=console)
    codes = []
    runner = threading.Thread(target=lambda: codes.append(launcher.run()))
    runner.start()
    try:
        deadline = time.monotonic() + 240
        while {e.get("task") for e in launcher.events if e["event"] == "first_step"} < {"chief", "worker-0"}:
            assert runner.is_alive() and time.monotonic() < deadline, "".join(console)
            time.sleep(0.5)
        plan = launcher.plan
        ports = [int(address.rpartition(":")[2]) for address in (*plan.ps, plan.chief, *plan.worker_slots,
                                                                  plan.shard_service)]
        # ps, chief, worker and the shard service all serving: the job is training across them.
        assert not [port for port in ports if other_host(port)], "a server is reachable from another host"
        assert not [port for port in ports if _reachable_here(port)]  # not even from this machine's loopback
    finally:
        launcher.request_stop()
        runner.join(timeout=120)
    assert codes == [130], "".join(console)
    assert "network: private (loopback only)" in "".join(console)
