"""`elastimator k8s rehearse`: a TFJob or JobSet manifest run on this machine as Kubernetes would run it, without
containers, before it is submitted.

Each pod is one process group in a network namespace of its own (rehearsal_net: its peers' DNS names in its
/etc/hosts), with the environment its controller gives it and its container's command, args and workingDir
(rehearsal_pods), and its volumes as Kubernetes gives them (rehearsal_volumes: a claim shared, an emptyDir and
the container's own disk per pod), in a mount namespace where the image's code (`--image-root`) is at /job, as
docs/kubernetes.md's Dockerfile puts it. The controllers' restart, success and failure rules decide what happens
as pods exit (rehearsal_controller). Each container's output goes to
`<work>/logs/<namespace>_<pod>/<container>/<restart>.log`, the kubelet's layout (what `kubectl logs` reads), and
`<work>/pods.json` says which process group each pod is. The exit status is 0 only when the controller would
call the job Succeeded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Mapping, TextIO

from elastimator.cluster import k8s, manifests, rehearsal_wiring
from elastimator.cluster.rehearsal_controller import Controller, Done, Restart, RestartAll, summary_rows
from elastimator.cluster.rehearsal_net import PodNetwork
from elastimator.cluster.rehearsal_pods import IMAGE_WORKDIR, Pod, Workload, workload
from elastimator.cluster.rehearsal_volumes import binds, claim_dirs
from elastimator.errors import ClusterError

STOP_GRACE_SECS = 10.0
"""As the kubelet's terminationGracePeriodSeconds is 30 by default: SIGTERM, then SIGKILL (shorter here)."""


@dataclasses.dataclass(frozen=True)
class RehearsalSpec:
    manifest: str
    image_root: str = "."
    """The image's code: mounted (copy on write, per pod) at /job."""
    work_dir: str = ""
    """Logs, claims, the pods' own disks (default: ./rehearsal-<job>)."""
    timeout_secs: float | None = None
    claims: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """A directory per claim name (default `<work>/claims/<name>`)."""


KEEP = "/run/elastimator-rehearsal"
"""Where a pod's script keeps the directories of this machine's Python that its mounts would hide (a mount point
made on this machine, in each pod's own mount namespace)."""


def python_paths() -> list[str]:
    """The directories this machine's Python and elastimator run from (the image's, in a rehearsal): the
    environment's prefix and every directory on the import path, each once (none under another)."""
    found = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, *sys.path) if p and os.path.isdir(p)}
    return [p for p in sorted(found) if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in found)]


def hidden_by(mount_points: list[str], paths: list[str]) -> list[str]:
    """The `paths` that a mount at one of `mount_points` would hide (at or under it)."""
    def under(path: str, point: str) -> bool:
        return path == point or path.startswith(point.rstrip("/") + "/")

    return [p for p in paths if any(under(p, point) for point in mount_points)]


def _pythonpath(image_root: str) -> str:
    """The image's `pip install -e .` of /job, where the image root holds elastimator; else this elastimator."""
    if os.path.isdir(os.path.join(image_root, "src", "elastimator")):
        return os.path.join(IMAGE_WORKDIR, "src")
    import elastimator

    return os.path.dirname(os.path.dirname(os.path.abspath(elastimator.__file__)))


def _exit_code(returncode: int) -> int:
    """A container's exit code as the kubelet reports it: 128 + the signal for a process a signal ended."""
    return 128 - returncode if returncode < 0 else returncode


class Rehearsal:
    def __init__(self, spec: RehearsalSpec, job: Workload, out: TextIO):
        self.spec, self.job, self.out = spec, job, out
        self.work = os.path.abspath(spec.work_dir or f"rehearsal-{job.name}")
        self.image_root = os.path.abspath(spec.image_root)
        self.controller = Controller(job)
        self.network = PodNetwork(job.pods)
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts = {p.name: 0 for p in job.pods}
        self.logs: dict[str, str] = {}
        self.stopped: list[str] = []
        self.pythonpath = _pythonpath(self.image_root)
        self.bin = os.path.dirname(sys.executable)

    # --- one pod ---

    def _script(self, pod: Pod, generation: int) -> str:
        pod_dir = os.path.join(self.work, "pods", pod.name, str(generation))
        upper, scratch = os.path.join(pod_dir, "image"), os.path.join(pod_dir, "image-work")
        steps = ["set -e", f"hostname {shlex.quote(pod.hostname)}", f"mkdir -p {IMAGE_WORKDIR}",
                 f"mount -t overlay overlay -o lowerdir={self.image_root},upperdir={upper},workdir={scratch} "
                 f"{IMAGE_WORKDIR}"]
        os.makedirs(upper, exist_ok=True)
        os.makedirs(scratch, exist_ok=True)
        # /tmp last: the sources above may live under this machine's /tmp, which the pod's own then hides.
        mounts = sorted(binds(pod, self.work, self.spec.claims, generation), key=lambda b: b.path == "/tmp")
        # The image's Python is this machine's: where a pod's mount would hide it (a checkout under /tmp), it is
        # kept aside first and put back over the pod's mount after.
        hidden = hidden_by([b.path for b in mounts], python_paths())
        for i, path in enumerate(hidden):
            steps += [f"mkdir -p {KEEP}/{i}", f"mount --bind {shlex.quote(path)} {KEEP}/{i}"]
        for bind in mounts:
            os.makedirs(bind.source, exist_ok=True)
            steps.append(f"mkdir -p {shlex.quote(bind.path)}")
            steps.append(f"mount --bind {shlex.quote(bind.source)} {shlex.quote(bind.path)}")
            if bind.read_only:
                steps.append(f"mount -o remount,bind,ro {shlex.quote(bind.path)}")
        for i, path in enumerate(hidden):
            steps += [f"mkdir -p {shlex.quote(path)}", f"mount --bind {KEEP}/{i} {shlex.quote(path)}"]
        steps.append(f"cd {shlex.quote(pod.working_dir)} || {{ echo 'rehearse: workingDir {pod.working_dir} does "
                     f"not exist in the image (--image-root {self.image_root} at {IMAGE_WORKDIR})' >&2; exit 128; }}")
        steps.append('exec "$@"')
        return "\n".join(steps)

    def _env(self, pod: Pod) -> dict[str, str]:
        image = {"PATH": f"{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                 "LANG": "C.UTF-8", "PYTHONPATH": self.pythonpath}
        env = {**image, **pod.env_dict()}
        address = self.network.addresses[pod.name]
        return {k: v.replace("$(POD_IP)", address) for k, v in env.items()}

    def start(self, pod: Pod) -> None:
        generation = self.controller.generations()[pod.name]
        restart = self.starts[pod.name]
        self.starts[pod.name] += 1
        log_dir = os.path.join(self.work, "logs", f"{self.job.namespace}_{pod.name}", "container")
        os.makedirs(log_dir, exist_ok=True)
        log = self.logs[pod.name] = os.path.join(log_dir, f"{restart}.log")
        command = ["ip", "netns", "exec", self.network.namespaces[pod.name], "unshare", "--uts", "--",
                   "/bin/sh", "-c", self._script(pod, generation), pod.name, *pod.command]
        with open(log, "wb") as f:
            self.procs[pod.name] = subprocess.Popen(command, env=self._env(pod), stdin=subprocess.DEVNULL, stdout=f,
                                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.write_state()

    def write_state(self) -> None:
        state = {name: {"pgid": proc.pid, "running": proc.poll() is None,
                        "restarts": self.controller.state[name].restarts, "log": self.logs.get(name)}
                 for name, proc in self.procs.items()}
        path = os.path.join(self.work, "pods.json")
        with open(path + ".tmp", "w") as f:
            json.dump(state, f, indent=1)
        os.replace(path + ".tmp", path)

    def stop(self, names) -> None:
        running = [n for n in names if n in self.procs and self.procs[n].poll() is None]
        for name in running:
            try:
                os.killpg(self.procs[name].pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_SECS
        for name in running:
            try:
                self.procs[name].wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.procs[name].pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.procs[name].wait()
        self.stopped += running

    # --- the job ---

    def run(self) -> Done:
        for pod in self.job.pods:
            self.start(pod)
        self.out.write(f"rehearsing {self.job.kind} {self.job.namespace}/{self.job.name}: {len(self.job.pods)} pod(s) "
                       f"({', '.join(p.name for p in self.job.pods)}); logs in {self.work}/logs\n")
        self.out.flush()
        deadline = None if self.spec.timeout_secs is None else time.monotonic() + self.spec.timeout_secs
        pods = {p.name: p for p in self.job.pods}
        while True:
            for name, proc in list(self.procs.items()):
                if proc.returncode is not None or proc.poll() is None:
                    continue
                code = _exit_code(proc.returncode)
                self.out.write(f"pod {name} exited with code {code}\n")
                for decision in self.controller.exited(name, code):
                    if isinstance(decision, Restart):
                        self.out.write(f"  restarting {name} ({'a new pod' if decision.new_pod else 'in place'}: "
                                       f"{decision.reason})\n")
                        self.start(pods[name])
                    elif isinstance(decision, RestartAll):
                        self.out.write(f"  restarting every pod: {decision.reason}\n")
                        self.stop(list(self.procs))
                        self.stopped.clear()
                        for pod in self.job.pods:
                            self.start(pod)
                    elif isinstance(decision, Done):
                        self.write_state()
                        return decision
                self.out.flush()
                self.write_state()
            if deadline is not None and time.monotonic() > deadline:
                return Done(False, f"the rehearsal's --timeout {self.spec.timeout_secs:g}s passed before the "
                                   f"{self.job.kind} finished.")
            time.sleep(0.2)

    def probe(self, pod: Pod) -> list[str]:
        """The addresses `pod` is given that do not answer from its own network namespace, each with why."""
        table = rehearsal_wiring.dns_table(self.job.pods)

        def answering(address: str) -> bool:  # a pod that is running: one that is not says nothing by refusing
            target = table.get(address.rpartition(":")[0])
            return target is not None and target.name != pod.name and self.procs[target.name].poll() is None

        addresses = sorted({a for _, a in rehearsal_wiring.named_addresses(pod) if answering(a)})
        if not addresses:
            return []
        script = ("import socket,sys\nfor a in sys.argv[1:]:\n h,_,p=a.rpartition(':')\n try:\n"
                  "  socket.create_connection((h,int(p)),timeout=3).close()\n except OSError as e:\n"
                  "  print(a, type(e).__name__, e, sep='\\t')\n")
        result = subprocess.run(["ip", "netns", "exec", self.network.namespaces[pod.name], sys.executable, "-c",
                                 script, *addresses], capture_output=True, text=True)
        return [f"pod {pod.name} cannot reach {line.replace(chr(9), ': ', 1).replace(chr(9), ' ')}"
                for line in result.stdout.splitlines() if line.strip()]


def _tail(path: str, lines: int = 6) -> list[str]:
    with open(path, errors="replace") as f:
        return [line if line.endswith("\n") else line + "\n" for line in f.readlines()[-lines:]]


def rehearse(spec: RehearsalSpec, out: TextIO = sys.stdout) -> int:
    """Runs the manifest's job (see the module doc); returns 0 when it succeeded, 1 when it failed, 130 when
    interrupted.

    Raises:
        ClusterError: for a manifest that is invalid, whose pods share no model_dir, or whose wiring names an
            address no pod listens on (each problem with its pod and address), or where the machine cannot run
            the rehearsal (not root).
    """
    documents = k8s.load(spec.manifest)
    manifests.check(documents)
    job = workload(documents)
    problems = rehearsal_wiring.problems(job.pods)
    if problems:
        raise ClusterError(f"{job.kind} {job.name} would not connect on a cluster:\n  " + "\n  ".join(problems))
    if os.geteuid() != 0:
        raise ClusterError("the rehearsal makes a network and mount namespace per pod, which needs root (or "
                           "CAP_SYS_ADMIN); run it as root, e.g. in a container or VM of your own.")
    rehearsal = Rehearsal(spec, job, out)
    os.makedirs(rehearsal.work, exist_ok=True)
    for directory in claim_dirs(job.pods, rehearsal.work, spec.claims).values():
        os.makedirs(directory, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    rehearsal.network.create()
    interrupted = False
    try:
        try:
            result = rehearsal.run()
        except KeyboardInterrupt:
            interrupted = True
            result = Done(False, "interrupted: every pod stopped.")
        failed = [p for p in job.pods if rehearsal.procs[p.name].poll() is not None and
                  rehearsal.controller.state[p.name].exit_codes and rehearsal.controller.state[p.name].exit_codes[-1]]
        unreachable = [] if result.succeeded else [line for p in failed for line in rehearsal.probe(p)]
        late = {n: _exit_code(p.returncode) for n, p in rehearsal.procs.items() if p.poll() is not None
                and len(rehearsal.controller.state[n].exit_codes) < rehearsal.starts[n]}
        rehearsal.stop(list(rehearsal.procs))
    finally:
        rehearsal.network.delete()
        signal.signal(signal.SIGTERM, previous)
    rehearsal.write_state()
    out.write(f"{'Succeeded' if result.succeeded else 'Failed'}: {result.reason}\n")
    for line in unreachable:
        out.write(f"  {line}\n")
    for pod in failed if not result.succeeded else []:
        out.write(f"  the end of {pod.name}'s log ({rehearsal.logs[pod.name]}):\n")
        out.write("".join(f"    {line}" for line in _tail(rehearsal.logs[pod.name])))
    out.write("\n")
    out.write("\n".join(summary_rows(rehearsal.controller, rehearsal.logs, rehearsal.stopped, late)) + "\n")
    out.flush()
    return 130 if interrupted else 0 if result.succeeded else 1
