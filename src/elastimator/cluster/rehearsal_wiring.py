"""Whether the addresses each rehearsed pod is given reach a pod listening there: the TF_CONFIG's cluster (the
operator's, or the one a JobSet's pod derives as it starts) and every `host:port` in its environment (the shard
service's address). Pure: pods in, problems out, each naming the pod and the address.

A pod listens on its own task's port in its TF_CONFIG (tf.distribute.Server binds the port its entry names), and
an elastimator chief on ELASTIMATOR_SHARD_SERVICE_LISTEN's and ELASTIMATOR_SHARD_REPORT_PORT's ports
(cluster/k8s.py writes them). A wrong name, namespace, subdomain or port in a hand-edited manifest is found
here before anything runs; the rehearsal probes the same addresses from a failed pod's own network as well.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Mapping

from elastimator.cluster import jobset
from elastimator.cluster.rehearsal_pods import Pod
from elastimator.errors import ClusterError

_ADDRESS = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.-]*):(\d{1,5})$")
_LOCAL = ("localhost", "127.0.0.1", "0.0.0.0")
_LISTEN_ENV = ("ELASTIMATOR_SHARD_SERVICE_LISTEN",)
_PORT_ENV = ("ELASTIMATOR_SHARD_REPORT_PORT",)


def tf_config(pod: Pod) -> dict[str, Any] | None:
    """The TF_CONFIG the pod's process will read: its environment's, else the one an elastimator JobSet pod derives
    (jobset.export_tf_config, which `elastimator run` calls first)."""
    env = pod.env_dict()
    if env.get("TF_CONFIG", "").strip():
        try:
            return json.loads(env["TF_CONFIG"])
        except ValueError as e:
            raise ClusterError(f"pod {pod.name}: TF_CONFIG is not JSON ({e}).") from None
    return jobset.tf_config_from_env(env)


def named_addresses(pod: Pod) -> Iterator[tuple[str, str]]:
    """(where, host:port) of every address the pod is told to reach."""
    config = tf_config(pod) or {}
    for role, addresses in (config.get("cluster") or {}).items():
        for i, address in enumerate(addresses if isinstance(addresses, list) else []):
            yield f"TF_CONFIG cluster.{role}[{i}]", str(address)
    for name, value in pod.env:
        if name not in _LISTEN_ENV and _ADDRESS.match(value or ""):
            yield name, value


def listening_ports(pod: Pod) -> set[int]:
    """The ports the pod's process will listen on (see the module doc)."""
    ports = set()
    config = tf_config(pod) or {}
    task = config.get("task") or {}
    entries = (config.get("cluster") or {}).get(task.get("type"), [])
    index = task.get("index", 0)
    if isinstance(entries, list) and isinstance(index, int) and 0 <= index < len(entries):
        match = _ADDRESS.match(str(entries[index]))
        if match:
            ports.add(int(match.group(2)))
    env = pod.env_dict()
    for name in _LISTEN_ENV:
        match = _ADDRESS.match(env.get(name, ""))
        if match:
            ports.add(int(match.group(2)))
    for name in _PORT_ENV:
        if env.get(name, "").isdigit() and int(env[name]):
            ports.add(int(env[name]))
    return ports


def dns_table(pods) -> dict[str, Pod]:
    return {name: pod for pod in pods for name in (pod.hostname, *pod.dns_names)}


def problems(pods, table: Mapping[str, Pod] | None = None) -> list[str]:
    """Every address a pod is given that no pod answers (see the module doc); empty when the wiring holds."""
    table = dict(table if table is not None else dns_table(pods))
    found = []
    for pod in pods:
        for where, address in named_addresses(pod):
            host, _, port = address.rpartition(":")
            if host in _LOCAL:
                continue
            target = table.get(host)
            if target is None:
                suffix = host.partition(".")[2]
                near = sorted(n for n in table if n.partition(".")[2] == suffix)[:3] or sorted(table)[:3]
                found.append(f"pod {pod.name}: {where} names {address}, but no pod of the job has the name {host} "
                             f"(a wrong job, namespace or subdomain?); names here are like {', '.join(near)}.")
                continue
            ports = listening_ports(target)
            if int(port) not in ports:
                listening = ", ".join(map(str, sorted(ports))) or "no port"
                found.append(f"pod {pod.name}: {where} names {address}, which is pod {target.name}, but it listens "
                             f"on {listening}, not {port}: {address} is unreachable.")
    return found
