"""The addresses of a job's tasks, and the TF_CONFIG each task gets.

Worker *slots* are addressed up front (`max_workers`), so that workers can
join a running job: every task's TF_CONFIG names every slot, while only the
slots in use run a process. Trainers' sessions filter devices to the
parameter servers and themselves, so an idle slot is never waited for.
"""

from __future__ import annotations

import dataclasses
import errno
import random
import secrets
import socket
from typing import Any

from elastimator.errors import ClusterError

ROLES = ("ps", "chief", "worker", "evaluator")
EVALUATOR_ENV = "ELASTIMATOR_EVALUATOR"
"""Set by whoever starts a job's tasks (the launcher, a Kubernetes manifest) to "1" when the job has an
evaluator task and "0" when it has none; TF_CONFIG cannot say. Without an evaluator the chief evaluates and
exports once training ends, as `elastimator run` does."""
CHIEF_WAITS_FOR_EVALUATOR_ENV = "ELASTIMATOR_CHIEF_WAITS_FOR_EVALUATOR"
"""Seconds a chief waits, its training done, for the evaluator's final round (`k8s manifest` sets it for a TFJob's
chief; job/evaluator_done.py)."""


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


@dataclasses.dataclass(frozen=True)
class Task:
    """One process of the job: a role and its index."""

    role: str
    index: int = 0

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclasses.dataclass(frozen=True)
class ClusterPlan:
    """Addresses for every task of a job on one machine, and its shard service and token.

    Example:
        >>> plan = ClusterPlan.allocate(ps=1, max_workers=4)
        >>> plan.tf_config(Task("worker", 2))["task"]
        {'type': 'worker', 'index': 2}
    """

    ps: tuple[str, ...]
    chief: str
    worker_slots: tuple[str, ...]
    shard_service: str
    token: str

    synchronous: bool = False
    """The chief and workers all-reduce (MultiWorkerMirroredStrategy): no ps, and each TF_CONFIG names only the
    workers that run (a collective waits for every task it names)."""

    @classmethod
    def allocate(cls, ps: int, max_workers: int, host: str = "127.0.0.1", base_port: int | None = None,
                 synchronous: bool = False) -> "ClusterPlan":
        """Picks free ports (or consecutive ports from `base_port`, which must all be free).

        Raises:
            ClusterError: for counts out of range, or a port of `base_port`'s range in use.
        """
        if synchronous and ps:
            raise ClusterError(f"a synchronous job (strategy 'multi_worker_mirrored') all-reduces among its chief "
                               f"and workers and has no parameter servers; got --ps {ps}. Leave --ps out.")
        if ps < 1 and not synchronous:
            raise ClusterError(f"a parameter-server job needs at least 1 ps; got --ps {ps}.")
        if max_workers < 0:
            raise ClusterError(f"max_workers must be 0 or more; got {max_workers}.")
        count = ps + 1 + max_workers + 1
        if base_port is None:
            ports = free_ports(host, count)
        else:
            ports = list(range(base_port, base_port + count))
            taken = [p for p in ports if not _bindable(host, p)]
            if taken:
                raise ClusterError(
                    f"port(s) {', '.join(map(str, taken))} on {host} are in use; the job needs {count} free ports "
                    f"from {base_port}. Pick another --base-port, or leave it out to use any free ports.")
        addresses = [f"{host}:{p}" for p in ports]
        return cls(ps=tuple(addresses[:ps]), chief=addresses[ps], worker_slots=tuple(addresses[ps + 1:-1]),
                   shard_service=addresses[-1], token=secrets.token_hex(16), synchronous=synchronous)

    @property
    def max_workers(self) -> int:
        return len(self.worker_slots)

    def address(self, task: Task) -> str | None:
        """Where a task's server listens (None for the evaluator, which serves nothing)."""
        if task.role == "ps":
            return self.ps[task.index]
        if task.role == "chief":
            return self.chief
        if task.role == "worker":
            return self.worker_slots[task.index]
        return None

    def tf_config(self, task: Task, workers: int | None = None) -> dict[str, Any]:
        """The TF_CONFIG of `task`. A parameter-server job's names every worker slot; a synchronous job's the
        first `workers` (default: every slot), the workers that run."""
        if task.role not in ROLES:
            raise ClusterError(f"unknown role {task.role!r}; expected one of {list(ROLES)}.")
        if task.role == "worker" and not 0 <= task.index < self.max_workers:
            raise ClusterError(f"worker {task.index} is outside this job's {self.max_workers} worker slot(s); "
                               "launch the job with a larger --max-workers to scale that far.")
        named = self.worker_slots[:workers] if self.synchronous and workers is not None else self.worker_slots
        cluster: dict[str, list[str]] = {"chief": [self.chief]} if self.synchronous else \
            {"ps": list(self.ps), "chief": [self.chief]}
        if named:
            cluster["worker"] = list(named)
        return {"cluster": cluster, "task": {"type": task.role, "index": task.index}}


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct ports free on `host` now, for servers that start later.

    They are drawn at random from the 12,000 ports below the kernel's ephemeral range, which a bind to port 0
    or an outgoing connection never takes: so no other socket of the job (the report line, a gRPC client)
    can take a task's port before its server binds it.
    """
    low = _ephemeral_low()
    candidates = range(max(1024, low - 12000), low)
    chosen: list[int] = []
    for port in random.sample(candidates, k=len(candidates)):
        if _bindable(host, port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise ClusterError(f"only {len(chosen)} of {count} ports from {candidates.start} to {candidates.stop - 1} "
                       f"are free on {host}; stop some servers there, or pass --base-port.")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where the range cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
