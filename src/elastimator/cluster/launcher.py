"""`elastimator launch`: a parameter-server job as local processes, supervised.

The launcher starts ps, chief, workers and (optionally) an evaluator, each an
`elastimator run` process with its own TF_CONFIG, streams their output with a
role prefix (and into `<model_dir>/logs/<task>.log`), and supervises them:

* a worker, evaluator, ps or chief that dies is restarted with exponential
  backoff, at most `max_restarts` times. Workers rejoin through the shard
  service; the chief resumes from the newest checkpoint and its seal; trainers
  whose session loses a restarted ps re-create it from the newest checkpoint.
* a task whose server does not listen within `start_timeout_secs` is a clear
  failure naming the task; a task that exits 2 (bad conf or usage) or 3 (a
  NaN loss, a reader past max_bad_records, a broken model_fn) is not restarted,
  since it would fail the same way again: the job ends with its message.
* workers can be added or removed at run time (`scale`, or a request file that
  `elastimator scale MODEL_DIR --workers K` writes); the other tasks go on.
* when the chief has finished, the launcher waits (bounded) for the workers
  and the evaluator, then stops the parameter servers and returns the job's
  exit code. `stop()` (Ctrl-C) ends every child; none is left behind.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, TextIO

from elastimator.cluster import autoscale
from elastimator.cluster.plan import ClusterPlan, Task
from elastimator.cluster.private_network import private_network
from elastimator.elastic.feed import FIRST_BATCH_LOG
from elastimator.errors import REPEATING_EXIT, USAGE_EXIT, ClusterError
from elastimator.estimator.sessions import reachable
from elastimator.tensorflow_import import NATIVE_LOG_LINE

logger = logging.getLogger("elastimator")
ERROR_LINE = "elastimator: error: "


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What to launch and how to supervise it."""

    conf: str
    """The job conf, as `elastimator run` takes it."""
    model_dir: str
    ps: int = 1
    workers: int = 1
    max_workers: int | None = None
    """Worker slots for scaling up at run time (default: `workers`)."""
    evaluator: bool = False
    max_steps: int | None = None
    max_restarts: int = 3
    """Restarts per task before the launcher gives up on it."""
    backoff_secs: float = 1.0
    """Wait before a task's first restart; doubles with each further restart."""
    start_timeout_secs: float = 120.0
    finish_timeout_secs: float = 180.0
    """After the chief finishes, how long workers and the evaluator get to finish."""
    worker_timeout_secs: float = 10.0
    """Heartbeat silence after which the shard service takes a worker's shards back."""
    base_port: int | None = None
    host: str = "127.0.0.1"
    autoscale: autoscale.ScalingLimits | None = None
    autoscale_every_secs: float = 30.0
    network: str = "auto"
    """private_network.MODES: "auto" runs the job's processes in a loopback-only network namespace where the
    machine allows it, so their TensorFlow servers (which listen on every interface) are unreachable from other
    hosts."""

    def __post_init__(self):
        if self.workers < 0:
            raise ClusterError(f"--workers must be 0 or more; got {self.workers}.")
        if self.max_workers is not None and self.max_workers < self.workers:
            raise ClusterError(f"--max-workers ({self.max_workers}) must be at least --workers ({self.workers}).")

    @property
    def worker_slots(self) -> int:
        return self.max_workers if self.max_workers is not None else self.workers


@dataclasses.dataclass
class _Child:
    task: Task
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    up: bool = False
    restarts: int = 0
    restart_at: float | None = None
    retired: bool = False
    """Stopped on purpose (scaled down, or the job is over): its exit is not a failure."""
    finished: bool = False
    exit_code: int | None = None


def scale_request_path(model_dir: str) -> str:
    return os.path.join(model_dir, "launcher", "scale.json")


def state_path(model_dir: str) -> str:
    return os.path.join(model_dir, "launcher", "state.json")


def _write_json(path: str, value) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w") as f:
        json.dump(value, f, indent=2)
    os.replace(temporary, path)


def request_scale(model_dir: str, workers: int) -> None:
    """Asks the launcher running the job in `model_dir` to run `workers` workers.

    Raises:
        ClusterError: when no launcher runs there, or it has fewer worker slots.
    """
    try:
        with open(state_path(model_dir)) as f:
            state = json.load(f)
    except FileNotFoundError:
        raise ClusterError(f"no launcher state in {model_dir}/launcher; is `elastimator launch` running this "
                           "model_dir?") from None
    if not state.get("running") or not _alive(state.get("launcher_pid")):
        raise ClusterError(f"the launcher of {model_dir} is not running (it stopped, or was killed); there is "
                           "nothing to scale. Start the job again with `elastimator launch`.")
    if not 0 <= workers <= state["max_workers"]:
        raise ClusterError(f"the job has {state['max_workers']} worker slot(s); asked for {workers}. Relaunch "
                           "with a larger --max-workers to go further.")
    _write_json(scale_request_path(model_dir), {"workers": workers, "requested_at": time.time()})


def _alive(pid) -> bool:
    """Whether a process with this pid runs on this machine (a launcher's state file names its pid)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def _die_with_parent() -> None:
    """In the child, before exec: be killed if the launcher dies (Linux), so no orphan outlives it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Launcher:
    """Starts and supervises one job's processes on this machine.

    Example:
        >>> launcher = Launcher(LaunchSpec("examples/census/census_conf.py:CensusConf", "/tmp/census",
        ...                                ps=1, workers=2, evaluator=True))
        >>> exit_code = launcher.run()
    """

    def __init__(self, spec: LaunchSpec, out: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.spec = spec
        self.plan = ClusterPlan.allocate(spec.ps, spec.worker_slots, spec.host, spec.base_port)
        self.logs_dir = os.path.join(spec.model_dir, "logs")
        self._out = out if out is not None else sys.stdout
        self._out_lock = threading.Lock()
        self._clock = clock
        self._children: dict[str, _Child] = {}
        self._target_workers = spec.workers
        self._training_done_at: float | None = None
        self._stopping = threading.Event()
        self._scale_seen = 0.0
        self._events: list[dict] = []
        self._events_lock = threading.Lock()
        self._scaler = autoscale.Tracker() if spec.autoscale else None
        self._next_autoscale = 0.0
        self._pumps: dict[str, threading.Thread] = {}
        self._last_error: dict[str, str] = {}
        """Per task, the last `elastimator: error:` line it printed: what the launcher reports if it fails."""
        self._run_thread: threading.Thread | None = None
        """The thread running `run()`: the one in the job's network namespace, which starts every process."""
        self._pending_scale: int | None = None
        """A worker count `scale()` was asked for from another thread, for `run()`'s thread to carry out."""

    # --- public ------------------------------------------------------------------------------

    @property
    def events(self) -> list[dict]:
        """What happened, in order: start, up, exit, restart, first_step, scale (each with a time)."""
        with self._events_lock:
            return list(self._events)

    def run(self) -> int:
        """Runs the job to its end; returns 0 when the chief (and evaluator) succeeded."""
        os.makedirs(self.logs_dir, exist_ok=True)
        self._run_thread = threading.current_thread()
        try:
            with private_network(self.spec.network) as network:
                self._say("launcher", network)
                try:
                    self._start_initial()
                    code = self._supervise()
                except BaseException:
                    self.stop()
                    raise
                self.stop()
        finally:
            self._run_thread = None
        return code

    def scale(self, workers: int) -> None:
        """Runs `workers` workers from now on: starts free slots, or stops the highest-numbered workers.

        Called from another thread while `run()` runs, it is carried out by `run()`'s thread within 0.2 s: only
        that thread is in the job's network namespace, where its processes must start and be reached.
        """
        if not 0 <= workers <= self.plan.max_workers:
            raise ClusterError(f"the job has {self.plan.max_workers} worker slot(s); asked for {workers}.")
        if self._run_thread is not None and threading.current_thread() is not self._run_thread:
            with self._events_lock:
                self._pending_scale = workers
            return
        self._event("scale", None, workers=workers, before=self._target_workers)
        self._say("launcher", f"scaling to {workers} worker(s) (from {self._target_workers})")
        self._target_workers = workers
        for index in range(self.plan.max_workers):
            child = self._children.get(Task("worker", index).name)
            running = child is not None and child.process is not None and child.process.poll() is None
            if index < workers and not running and self._training_done_at is None:
                if child is None or child.retired or child.finished:
                    self._start(Task("worker", index), fresh=True)
            elif index >= workers and running:
                self._retire(child)
        self._write_state()

    def restarts(self) -> dict[str, int]:
        """Tasks restarted at least once, and how often."""
        return {name: child.restarts for name, child in self._children.items() if child.restarts}

    def request_stop(self) -> None:
        """Asks a running `run()` to end the job (safe from a signal handler); it returns 130."""
        self._stopping.set()

    def stop(self, grace_secs: float = 30.0) -> None:
        """Ends every child still running: SIGTERM (trainers save a checkpoint first, within 25 s), then
        SIGKILL after `grace_secs`."""
        self._stopping.set()
        live = [c for c in self._children.values() if c.process is not None and c.process.poll() is None]
        # Trainers first: their last step and checkpoint need the parameter servers, which go after them.
        self._terminate([c for c in live if c.task.role != "ps"], grace_secs)
        self._terminate([c for c in live if c.task.role == "ps"], grace_secs)
        self._write_state(running=False)

    @staticmethod
    def _terminate(children: list[_Child], grace_secs: float) -> None:
        for child in children:
            child.retired = True
            child.process.terminate()
        deadline = time.monotonic() + grace_secs
        for child in children:
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()

    # --- starting ----------------------------------------------------------------------------

    def _start_initial(self) -> None:
        self._say("launcher", f"{self.spec.ps} ps, chief, {self.spec.workers} worker(s) of {self.plan.max_workers} "
                              f"slot(s){', evaluator' if self.spec.evaluator else ''}; logs in {self.logs_dir}")
        tasks = [Task("ps", i) for i in range(self.spec.ps)] + [Task("chief")]
        tasks += [Task("worker", i) for i in range(self.spec.workers)]
        if self.spec.evaluator:
            tasks.append(Task("evaluator"))
        for task in tasks:
            self._start(task, fresh=True)
        self._write_state()

    def _command(self) -> list[str]:
        command = [sys.executable, "-m", "elastimator.cli", "run", self.spec.conf, "--no-progress", "--no-summary",
                   "--model-dir", self.spec.model_dir]
        if self.spec.max_steps is not None:
            command += ["--max-steps", str(self.spec.max_steps)]
        return command

    def _env(self, task: Task) -> dict[str, str]:
        return dict(os.environ, TF_CONFIG=json.dumps(self.plan.tf_config(task)), PYTHONUNBUFFERED="1",
                    ELASTIMATOR_TRACEBACKS="1", ELASTIMATOR_SHARD_SERVICE=self.plan.shard_service,
                    ELASTIMATOR_JOB_TOKEN=self.plan.token,
                    ELASTIMATOR_WORKER_TIMEOUT_SECS=str(self.spec.worker_timeout_secs))

    def _start(self, task: Task, fresh: bool = False) -> None:
        child = self._children.get(task.name)
        if child is None or fresh:
            child = self._children[task.name] = _Child(task)
        log = open(os.path.join(self.logs_dir, f"{task.name}.log"), "a")
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} start (restart {child.restarts})\n")
        log.flush()
        child.process = subprocess.Popen(self._command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         env=self._env(task), text=True, errors="replace", bufsize=1,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        child.started_at, child.up, child.restart_at = self._clock(), False, None
        child.exit_code, child.finished, child.retired = None, False, False
        pump = self._pumps[task.name] = threading.Thread(target=self._pump, args=(task, child.process, log),
                                                        name=f"log-{task.name}", daemon=True)
        pump.start()
        self._event("start", task, pid=child.process.pid, restart=child.restarts)

    def _pump(self, task: Task, process: subprocess.Popen, log: TextIO) -> None:
        with log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                if FIRST_BATCH_LOG in line:  # the replacement's first step, for timing
                    self._event("first_step", task)
                if line.startswith(ERROR_LINE):
                    self._last_error[task.name] = line[len(ERROR_LINE):].strip()
                if not NATIVE_LOG_LINE.match(line):
                    self._say(task.name, line.rstrip("\n"))

    # --- supervising -------------------------------------------------------------------------

    def _supervise(self) -> int:
        while True:
            now = self._clock()
            self._read_scale_request()
            with self._events_lock:
                pending, self._pending_scale = self._pending_scale, None
            if pending is not None:
                self.scale(pending)
            for child in list(self._children.values()):
                failure = self._check(child, now)
                if failure is not None:
                    message, code = failure
                    self._say("launcher", message)
                    return code
            if self._training_done_at is not None:
                result = self._finish_when_ready(now)
                if result is not None:
                    return result
            elif self._scaler is not None and now >= self._next_autoscale:
                self._autoscale(now)
            if self._stopping.wait(0.2):
                return 130

    def _check(self, child: _Child, now: float) -> tuple[str, int] | None:
        """Handles a child's start, exit and restart; returns (message, exit code) when the job must fail."""
        task = child.task
        if child.process is None or child.finished:
            return None
        if child.restart_at is not None:
            if now >= child.restart_at and self._training_done_at is None:
                self._start(task)
            return None
        code = child.process.poll()
        address = self.plan.address(task)
        if code is None:
            if not child.up and address is not None:
                if reachable(address, timeout_secs=0.5):
                    child.up = True
                    self._event("up", task)
                elif now - child.started_at > self.spec.start_timeout_secs and self._training_done_at is None:
                    child.process.kill()
                    return (f"{task.name} did not start: its server never listened on {address} within "
                            f"{self.spec.start_timeout_secs:.0f}s. See {self.logs_dir}/{task.name}.log.", 1)
            return None
        child.exit_code = code
        self._event("exit", task, code=code)
        if child.retired or code == 0 or (self._training_done_at is not None and task.role == "worker"):
            child.finished = True
            if task.role == "chief" and code == 0:
                self._training_done_at = now
                self._say("launcher", "the chief finished training")
            return None
        if code == USAGE_EXIT:
            return (f"usage error: {task.name} exited with code 2 (an invalid conf or bad arguments); not "
                    f"restarting it. See {self.logs_dir}/{task.name}.log.", USAGE_EXIT)
        if code == REPEATING_EXIT:
            self._pumps[task.name].join(timeout=5)  # its last lines, the error among them
            why = self._last_error.get(task.name, "see its log")
            return (f"{task.name} failed in a way a restart would repeat, so the job ends here: {why} "
                    f"(log: {self.logs_dir}/{task.name}.log)", 1)
        if child.restarts >= self.spec.max_restarts:
            if task.role == "worker":
                child.finished = True
                self._say("launcher", f"{task.name} failed {child.restarts + 1} times; leaving its slot empty")
                return None
            return (f"{task.name} exited with code {code} and was already restarted {child.restarts} time(s); "
                    f"giving up. See {self.logs_dir}/{task.name}.log.", 1)
        delay = self.spec.backoff_secs * 2 ** child.restarts
        child.restarts += 1
        child.restart_at = now + delay
        self._event("restart", task, code=code, delay_secs=delay)
        self._say("launcher", f"{task.name} exited with code {code}; restarting it in {delay:.1f}s "
                              f"(restart {child.restarts} of {self.spec.max_restarts})")
        return None

    def _finish_when_ready(self, now: float) -> int | None:
        for child in self._children.values():
            if child.task.role == "worker" and child.process is not None and not child.finished and not child.up:
                # A worker still starting (restarted near the end) has no shard left to train: the job is done.
                self._say("launcher", f"{child.task.name} was still starting when the chief finished; stopping it, "
                                      "there is nothing left for it to train")
                self._retire(child)
        waiting = [c for c in self._children.values() if c.task.role in ("worker", "evaluator")
                   and c.process is not None and not c.finished and c.restart_at is None]
        overdue = now - self._training_done_at > self.spec.finish_timeout_secs
        if waiting and not overdue:
            return None
        for child in waiting:
            self._say("launcher", f"{child.task.name} has not finished {self.spec.finish_timeout_secs:.0f}s after "
                                  "the chief; stopping it")
            self._retire(child)
        for child in self._children.values():
            if child.task.role == "ps":
                self._retire(child)
        evaluator = self._children.get(Task("evaluator").name)
        if evaluator is not None and evaluator.exit_code not in (0, None):
            return 1
        return 1 if evaluator is not None and evaluator in waiting else 0

    def _retire(self, child: _Child) -> None:
        child.retired = True
        child.restart_at = None
        if child.process is not None and child.process.poll() is None:
            child.process.terminate()
            try:
                child.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        child.finished = True
        if child.task.role == "worker":
            self._return_shards(child.task)

    def _return_shards(self, task: Task) -> None:
        """Hands a stopped worker's shards back at once, instead of after its heartbeat times out."""
        if self._training_done_at is not None:
            return
        from elastimator.elastic.service import ShardClient
        from elastimator.elastic.shards import ShardServiceError

        client = ShardClient(self.plan.shard_service, self.plan.token, worker="launcher", timeout_secs=5,
                             retry_secs=5)
        try:
            client.fail_worker(task.name)
        except ShardServiceError as e:
            logger.warning("Could not return %s's shards right away (%s); the service takes them back when its "
                           "heartbeat times out.", task.name, e)
        finally:
            client.close()

    # --- scaling -----------------------------------------------------------------------------

    def _read_scale_request(self) -> None:
        path = scale_request_path(self.spec.model_dir)
        try:
            changed = os.stat(path).st_mtime
        except FileNotFoundError:
            return
        if changed <= self._scale_seen:
            return
        self._scale_seen = changed
        try:
            with open(path) as f:
                workers = int(json.load(f)["workers"])
            self.scale(workers)
        except (ValueError, KeyError, TypeError, ClusterError) as e:
            self._say("launcher", f"ignoring the scale request in {path}: {e}")

    def _autoscale(self, now: float) -> None:
        self._next_autoscale = now + self.spec.autoscale_every_secs
        running = sum(1 for c in self._children.values() if c.task.role == "worker" and c.process is not None
                      and c.process.poll() is None and not c.retired)
        ps_pids = [c.process.pid for c in self._children.values() if c.task.role == "ps" and c.process is not None]
        measurement = self._scaler.measure(now, running, self.spec.model_dir, ps_pids)
        if measurement is None:
            return
        decision = autoscale.decide(self._scaler.history, self.spec.autoscale)
        self._event("autoscale", None, workers=decision.workers, reason=decision.reason)
        if decision.workers != self._target_workers:
            self._say("launcher", f"autoscale: {decision.reason}")
            self.scale(decision.workers)

    # --- records -----------------------------------------------------------------------------

    def _event(self, kind: str, task: Task | None, **fields) -> None:
        with self._events_lock:
            self._events.append({"event": kind, "task": task.name if task else None, "time": self._clock(),
                                 **fields})

    def _say(self, source: str, text: str) -> None:
        with self._out_lock:
            self._out.write(f"[{source}] {text}\n")
            self._out.flush()

    def _write_state(self, running: bool = True) -> None:
        tasks = {name: c.process.pid for name, c in self._children.items()
                 if c.process is not None and c.process.poll() is None}
        _write_json(state_path(self.spec.model_dir), {
            "running": running and not self._stopping.is_set(), "launcher_pid": os.getpid(),
            "workers": self._target_workers, "max_workers": self.plan.max_workers, "tasks": tasks,
            "shard_service": self.plan.shard_service})
