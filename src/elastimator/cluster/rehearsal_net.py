"""The rehearsal's cluster network: one network namespace per pod, all on one bridge, and each pod's DNS names
in every pod's /etc/hosts (root only).

The bridge lives in a namespace of its own, so nothing here touches the machine's network: pods reach each
other and nothing else, as a NetworkPolicy-free cluster network would let them reach each other. `ip netns exec`
bind-mounts /etc/netns/<namespace>/hosts and resolv.conf over /etc's, which gives each pod the names its peers
have (rehearsal_pods: a TFJob replica's service names, a JobSet pod's `<hostname>.<subdomain>` names) and a
resolver that answers nothing else at once: a wrong name fails here as it would there.

Every name carries the process id of the rehearsal that made it, and `remove_leftovers` deletes what a rehearsal
killed mid-way left behind.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from elastimator.cluster.rehearsal_pods import Pod
from elastimator.errors import ClusterError

PREFIX = "elr"
SUBNET = "10.244.0"
_NAME = re.compile(rf"^{PREFIX}(\d+)-")
NETNS_ETC = "/etc/netns"


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterError(f"`ip {' '.join(args)}` failed: {result.stderr.strip()}. The rehearsal needs root (network "
                           "namespaces) and iproute2.")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def remove_leftovers() -> None:
    """Deletes the namespaces and hosts files of rehearsals whose process is gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    names = {(line.split() or [""])[0] for line in listed}
    if os.path.isdir(NETNS_ETC):
        names |= set(os.listdir(NETNS_ETC))
    for name in names:
        match = _NAME.match(name)
        if match and not _alive(int(match.group(1))):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            shutil.rmtree(os.path.join(NETNS_ETC, name), ignore_errors=True)


def hosts_file(pod: Pod, pods, addresses: dict[str, str]) -> str:
    """/etc/hosts of `pod`: loopback, then every pod's address with its hostname and DNS names."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    for other in pods:
        names = list(dict.fromkeys([*reversed(other.dns_names), other.hostname]))
        lines.append(f"{addresses[other.name]}\t{' '.join(names)}")
    return "\n".join(lines) + "\n"


RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"
"""No DNS server in the pod's network: a name its /etc/hosts lacks fails at once (connection refused)."""


class PodNetwork:
    """The namespaces and addresses of one rehearsal's pods."""

    def __init__(self, pods):
        if len(pods) > 250:
            raise ClusterError(f"the rehearsal runs up to 250 pods; the manifest has {len(pods)}.")
        self.pods = list(pods)
        tag = f"{PREFIX}{os.getpid()}"
        self.bridge_namespace = f"{tag}-net"
        self.namespaces = {p.name: f"{tag}-{i}" for i, p in enumerate(self.pods)}
        self.addresses = {p.name: f"{SUBNET}.{i + 2}" for i, p in enumerate(self.pods)}

    def create(self) -> "PodNetwork":
        remove_leftovers()
        try:
            _ip("netns", "add", self.bridge_namespace)
            _ip("-n", self.bridge_namespace, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.bridge_namespace, "link", "set", "br0", "up")
            for i, pod in enumerate(self.pods):
                namespace = self.namespaces[pod.name]
                _ip("netns", "add", namespace)
                _ip("-n", self.bridge_namespace, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0",
                    "netns", namespace)
                _ip("-n", namespace, "addr", "add", f"{self.addresses[pod.name]}/24", "dev", "eth0")
                _ip("-n", namespace, "link", "set", "eth0", "up")
                _ip("-n", namespace, "link", "set", "lo", "up")
                _ip("-n", self.bridge_namespace, "link", "set", f"v{i}", "master", "br0")
                _ip("-n", self.bridge_namespace, "link", "set", f"v{i}", "up")
                etc = os.path.join(NETNS_ETC, namespace)
                os.makedirs(etc, exist_ok=True)
                with open(os.path.join(etc, "hosts"), "w") as f:
                    f.write(hosts_file(pod, self.pods, self.addresses))
                with open(os.path.join(etc, "resolv.conf"), "w") as f:
                    f.write(RESOLV_CONF)
        except BaseException:
            self.delete()
            raise
        return self

    def delete(self) -> None:
        for namespace in [*self.namespaces.values(), self.bridge_namespace]:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
            shutil.rmtree(os.path.join(NETNS_ETC, namespace), ignore_errors=True)
