"""`elastimator launch`: a parameter-server or synchronous job as local processes, supervised.

The launcher starts ps (none for a synchronous job), chief, workers and (optionally) an evaluator, each an
`elastimator run` process with its own TF_CONFIG, streams their output with a
role prefix (and into `<model_dir>/logs/<task>.log`), and supervises them:

* a worker, evaluator, ps or chief that dies is restarted with exponential
  backoff, at most `max_restarts` times in a row with no progress between them:
  a checkpoint newer than the one a task started from gives its budget back
  (supervision.py's rule), so a crash loop ends the job and a long job's faults
  do not add up. Workers rejoin through the shard service; the chief resumes
  from the newest checkpoint and its seal; trainers whose session loses a
  restarted ps re-create it from the newest checkpoint.
* a task whose server does not listen within `start_timeout_secs` is a clear
  failure naming the task; a task that exits 2 (bad conf or usage) or 3 (a
  NaN loss, a reader past max_bad_records, a broken model_fn) is not restarted,
  since it would fail the same way again: the job ends with its message.
* workers can be added or removed at run time (`scale`, or a request file that
  `elastimator scale MODEL_DIR --workers K` writes); the other tasks go on.
* a synchronous job (`synchronous`: strategy 'multi_worker_mirrored') trains as one
  group: a trainer's death restarts the chief and every worker from the newest
  checkpoint, and a scale restarts them from the checkpoint the chief saves as it
  stops (supervision.py says how).
* with an evaluator, the trainers run at a lower CPU priority (`nice`), so that
  on a machine with few cores the evaluator evaluates the checkpoints as they
  come instead of starving until the end.
* when the chief has finished, the launcher waits (bounded) for the workers
  and the evaluator, then stops the parameter servers and returns the job's
  exit code. `stop()` (Ctrl-C) ends every child; none is left behind.
"""

from __future__ import annotations

import contextlib
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

from elastimator._network import reachable
from elastimator.cluster import autoscale, supervision
from elastimator.cluster.plan import EVALUATOR_ENV, ClusterPlan, Task
from elastimator.cluster.private_network import private_network
from elastimator.errors import ClusterError
from elastimator.cluster import progress_file
from elastimator.elastic.model_dir_files import newest_saved_step
from elastimator.tensorflow_import import NATIVE_LOG_LINE

logger = logging.getLogger("elastimator")
ERROR_LINE = "elastimator: error: "
TRAINER_NICENESS = 5
"""How much lower than the evaluator and the parameter servers the trainers run, in a job with an evaluator."""


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What to launch and how to supervise it."""

    conf: str
    """The job conf, as `elastimator run` takes it."""
    model_dir: str
    ps: int | None = None
    """Parameter servers: 1 by default, none for a synchronous job."""
    workers: int = 1
    max_workers: int | None = None
    """Worker slots for scaling up at run time (default: `workers`)."""
    evaluator: bool = False
    max_steps: int | None = None
    max_restarts: int = 3
    """Restarts of a task in a row, with no newer checkpoint between them, before the launcher gives up on it."""
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
    synchronous: bool = False
    """The chief and workers all-reduce (the conf's strategy 'multi_worker_mirrored'): no ps (`ps` must be 0), and
    the group restarts as one."""
    stall_secs: float = progress_file.STALL_SECS
    """A synchronous job: a trainer that stepped before and makes no step for this long (a frozen process: its port
    still answers) stops the group, which starts again from the newest checkpoint."""
    network: str = "auto"
    """private_network.MODES: "auto" runs the job's processes in a loopback-only network namespace where the
    machine allows it, so their TensorFlow servers (which listen on every interface) are unreachable from other
    hosts."""

    def __post_init__(self):
        if self.ps is None:
            object.__setattr__(self, "ps", 0 if self.synchronous else 1)
        if self.workers < 0:
            raise ClusterError(f"--workers must be 0 or more; got {self.workers}.")
        if self.synchronous and self.autoscale is not None:
            raise ClusterError("--autoscale measures the parameter servers' load, and a synchronous job (strategy "
                               "'multi_worker_mirrored') has none; scale it with `elastimator scale` instead.")
        if self.max_workers is not None and self.max_workers < self.workers:
            raise ClusterError(f"--max-workers ({self.max_workers}) must be at least --workers ({self.workers}).")
        if not self.stall_secs > 0:
            raise ClusterError(f"--stall-secs must be more than 0; got {self.stall_secs}.")

    @property
    def worker_slots(self) -> int:
        return self.max_workers if self.max_workers is not None else self.workers


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
    refused = supervision.scale_refused(workers, state["max_workers"])
    if refused is not None:
        raise ClusterError(f"{refused}. Relaunch with a larger --max-workers to go further.")
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
    """Starts and supervises one job's processes on this machine: the shell around `supervision.step`.

    Each turn (every `turn_secs`) it turns what it sees into events (exits, servers that
    listen, scale requests, a stop request), asks `supervision.step` what to do,
    and does it. It decides nothing itself.

    Example:
        >>> launcher = Launcher(LaunchSpec("examples/census/census_conf.py:CensusConf", "/tmp/census",
        ...                                ps=1, workers=2, evaluator=True))
        >>> exit_code = launcher.run()
    """

    def __init__(self, spec: LaunchSpec, out: TextIO | None = None, clock: Callable[[], float] = time.monotonic, *,
                 spawn: Callable[[list[str], dict[str, str]], subprocess.Popen] | None = None,
                 probe: Callable[[str], bool] | None = None, turn_secs: float = 0.2):
        """`spawn(command, env)` starts a task's process and `probe(address)` tells whether its server listens;
        both default to the real thing, and tests pass fakes (with a fake `clock` and a short `turn_secs`)."""
        self.spec = spec
        self.plan = ClusterPlan.allocate(spec.ps, spec.worker_slots, spec.host, spec.base_port,
                                         synchronous=spec.synchronous)
        self.logs_dir = os.path.join(spec.model_dir, "logs")
        self.policy = supervision.Policy(
            max_restarts=spec.max_restarts, backoff_secs=spec.backoff_secs, start_timeout_secs=spec.start_timeout_secs,
            finish_timeout_secs=spec.finish_timeout_secs, worker_slots=self.plan.max_workers, logs_dir=self.logs_dir,
            synchronous=spec.synchronous)
        self._out = out if out is not None else sys.stdout
        self._out_lock = threading.Lock()
        self._clock = clock
        self._spawn = spawn or _popen
        self._probe = probe or (lambda address: reachable(address, timeout_secs=0.5))
        self._turn_secs = turn_secs
        self._job: supervision.Job | None = None
        self._processes: dict[str, subprocess.Popen] = {}
        self._pumps: dict[str, threading.Thread] = {}
        self._last_error: dict[str, str] = {}
        """Per task, the last `elastimator: error:` line it printed: what the launcher reports if it fails."""
        self._stepped: set[str] = set()
        """Tasks whose current process has written its progress file (trained its first step)."""
        self._stopping = threading.Event()
        self._stop_requested = False
        """Set by `request_stop`: a plain flag, which a signal handler may set (see there)."""
        self._requests: list[supervision.Event] = []
        """Scale requests from other threads, for the next turn."""
        self._scale_seen = 0.0
        self._events: list[dict] = []
        self._events_lock = threading.Lock()
        self._scaler = autoscale.Tracker() if spec.autoscale else None
        self._next_autoscale = 0.0
        self._checkpoint_step: int | None = None
        self._next_checkpoint_look = 0.0

    # --- public ------------------------------------------------------------------------------

    @property
    def events(self) -> list[dict]:
        """What happened, in order: start, up, exit, restart, first_step, checkpoint, progress, scale (each with a
        time)."""
        with self._events_lock:
            return list(self._events)

    def run(self) -> int:
        """Runs the job to its end; returns 0 when the chief (and evaluator) succeeded."""
        os.makedirs(self.logs_dir, exist_ok=True)
        with private_network(self.spec.network) as network:
            self._say("launcher", network)
            self._drop_earlier_scale_request()
            try:
                code = self._supervise()
            finally:
                self.stop()
        return code

    def scale(self, workers: int) -> None:
        """Runs `workers` workers from now on: starts free slots, or stops the highest-numbered workers.

        Safe from any thread: the request is carried out by `run()`'s next turn (within 0.2 s), on the thread
        that is in the job's network namespace, where its processes must start and be reached.
        """
        refused = supervision.scale_refused(workers, self.plan.max_workers)
        if refused is not None:
            raise ClusterError(f"{refused}.")
        with self._events_lock:
            self._requests.append(supervision.ScaleTo(workers))

    def restarts(self) -> dict[str, int]:
        """Tasks restarted at least once, and how often."""
        children = self._job.children.values() if self._job is not None else ()
        return {c.task.name: c.restarts for c in children if c.restarts}

    def strikes(self) -> dict[str, int]:
        """Tasks with restarts since the job last made progress, and how many: what counts against
        `max_restarts` now (supervision.py)."""
        children = self._job.children.values() if self._job is not None else ()
        return {c.task.name: c.strikes for c in children if c.strikes}

    def request_stop(self) -> None:
        """Asks a running `run()` to end the job, within a turn; it returns 130. Safe from a signal handler: it
        takes no lock. (Setting the Event the loop waits on could deadlock there: the handler runs in the main
        thread, which may be holding that Event's lock as the signal comes.)"""
        self._stop_requested = True

    def _stop_asked(self) -> bool:
        """Whether the job is to end: asked by `request_stop` or `stop`."""
        return self._stop_requested or self._stopping.is_set()

    def stop(self, grace_secs: float = 30.0) -> None:
        """Ends every child still running: SIGTERM (trainers save a checkpoint first, within 25 s), then
        SIGKILL after `grace_secs`."""
        self._stopping.set()
        live = [name for name, process in self._processes.items() if process.poll() is None]
        for group in supervision.stop_order(live, synchronous=self.spec.synchronous):
            _terminate([self._processes[name] for name in group], grace_secs)
        self._write_state(running=False)

    # --- the loop ----------------------------------------------------------------------------

    def _supervise(self) -> int:
        servers = "synchronous (no ps)" if self.spec.synchronous else f"{self.spec.ps} ps"
        self._say("launcher", f"{servers}, chief, {self.spec.workers} worker(s) of {self.plan.max_workers} "
                              f"slot(s){', evaluator' if self.spec.evaluator else ''}; logs in {self.logs_dir}")
        tasks = [Task("ps", i) for i in range(self.spec.ps)] + [Task("chief")]
        tasks += [Task("worker", i) for i in range(self.spec.workers)]
        if self.spec.evaluator:
            tasks.append(Task("evaluator"))
        self._checkpoint_step = newest_saved_step(self.spec.model_dir)
        self._job, decisions = supervision.begin(tasks, self.spec.workers, self._clock(), self._checkpoint_step)
        code = self._carry_out(decisions)
        while code is None:
            self._stopping.wait(self._turn_secs)
            now = self._clock()
            events = [supervision.StopRequested()] if self._stop_asked() else self._observe(now)
            self._job, decisions = supervision.step(self._job, events, now, self.policy)
            code = self._carry_out(decisions)
        return code

    def _observe(self, now: float) -> list[supervision.Event]:
        """What changed since the last turn, as events."""
        events = self._scale_requests(now)
        for name, child in self._job.children.items():
            if not child.state.alive:
                continue
            process = self._processes[name]
            code = process.poll()
            if code is not None:
                self._pumps[name].join(timeout=5)  # its last lines, an error line among them
                events.append(supervision.Exited(name, code, self._last_error.get(name)))
                continue
            if name not in self._stepped and progress_file.read(self._progress_path(name)) is not None:
                self._stepped.add(name)
                self._event("first_step", name)
                events.append(supervision.Stepped(name))
            elif self.spec.synchronous and name in self._stepped:
                silent = progress_file.stalled(self._progress_path(name), self.spec.stall_secs)
                if silent is not None:
                    events.append(supervision.Stalled(name, silent))
            if child.state is supervision.State.STARTING and self._probe(self.plan.address(child.task)):
                events.append(supervision.Listening(name))
        return events + self._new_checkpoint(now)

    def _new_checkpoint(self, now: float) -> list[supervision.Event]:
        """A `Checkpointed` event when the model_dir's newest checkpoint changed (looked at once a second: on a
        remote file system each look is a listing)."""
        if now < self._next_checkpoint_look:
            return []
        self._next_checkpoint_look = now + 1.0
        step = newest_saved_step(self.spec.model_dir)
        if step is None or step == self._checkpoint_step:
            return []
        self._checkpoint_step = step
        self._event("checkpoint", None, step=step)
        return [supervision.Checkpointed(step)]

    def _scale_requests(self, now: float) -> list[supervision.Event]:
        with self._events_lock:
            events, self._requests = self._requests, []
        request = self._read_scale_request()
        if request is not None:
            events.append(supervision.ScaleTo(request))
        if self._scaler is not None and self._job.chief_done_at is None and now >= self._next_autoscale:
            answer = self._autoscale(now)
            if answer is not None:
                events.append(answer)
        return events

    def _carry_out(self, decisions: list[supervision.Decision]) -> int | None:
        changed = False
        for decision in decisions:
            if isinstance(decision, supervision.Start):
                self._start(decision.task, decision.restart)
                changed = True
            elif isinstance(decision, supervision.Stop):
                self._stop(decision.task, decision.return_shards)
                changed = True
            elif isinstance(decision, supervision.Kill):
                self._processes[decision.task.name].kill()
            elif isinstance(decision, supervision.Say):
                self._say("launcher", decision.text)
            elif isinstance(decision, supervision.Record):
                self._event(decision.event, decision.task, **decision.fields)
            elif isinstance(decision, supervision.End):
                return decision.code
        if changed:
            self._write_state()
        return None

    # --- processes ---------------------------------------------------------------------------

    def _command(self, task: Task) -> list[str]:
        command = [sys.executable, "-m", "elastimator.cli", "run", self.spec.conf, "--no-progress", "--no-summary",
                   "--model-dir", self.spec.model_dir]
        if self.spec.evaluator and task.role in ("chief", "worker"):
            # Trainers keep every core busy; at equal priority an evaluator on a small machine got so little
            # CPU that it evaluated the first and the last checkpoint only. Where cores are free this costs
            # the trainers nothing.
            command = ["nice", "-n", str(TRAINER_NICENESS), *command]
        if self.spec.max_steps is not None:
            command += ["--max-steps", str(self.spec.max_steps)]
        return command

    def _progress_path(self, name: str) -> str:
        return os.path.join(self.logs_dir, f"{name}.progress.json")

    def _env(self, task: Task) -> dict[str, str]:
        workers = self._job.target_workers if self._job is not None else self.spec.workers
        return dict(os.environ, TF_CONFIG=json.dumps(self.plan.tf_config(task, workers)), PYTHONUNBUFFERED="1",
                    ELASTIMATOR_TRACEBACKS="1", ELASTIMATOR_SHARD_SERVICE=self.plan.shard_service,
                    ELASTIMATOR_JOB_TOKEN=self.plan.token,
                    ELASTIMATOR_WORKER_TIMEOUT_SECS=str(self.spec.worker_timeout_secs),
                    **{progress_file.ENV: self._progress_path(task.name), EVALUATOR_ENV: str(int(self.spec.evaluator))})

    def _start(self, task: Task, restart: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._progress_path(task.name))
        self._stepped.discard(task.name)
        self._last_error.pop(task.name, None)
        log = open(os.path.join(self.logs_dir, f"{task.name}.log"), "a")
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} start (restart {restart})\n")
        log.flush()
        process = self._processes[task.name] = self._spawn(self._command(task), self._env(task))
        pump = self._pumps[task.name] = threading.Thread(target=self._pump, args=(task, process, log),
                                                        name=f"log-{task.name}", daemon=True)
        pump.start()
        self._event("start", task.name, pid=process.pid, restart=restart)

    def _pump(self, task: Task, process: subprocess.Popen, log: TextIO) -> None:
        with log:
            for line in process.stdout:
                log.write(line)
                log.flush()
                if line.startswith(ERROR_LINE):
                    self._last_error[task.name] = line[len(ERROR_LINE):].strip()
                if not NATIVE_LOG_LINE.match(line):
                    self._say(task.name, line.rstrip("\n"))

    def _stop(self, task: Task, return_shards: bool) -> None:
        process = self._processes.get(task.name)
        if process is not None and process.poll() is None:
            _terminate([process], grace_secs=10)
        if return_shards:
            self._return_shards(task)

    def _return_shards(self, task: Task) -> None:
        """Hands a stopped worker's shards back at once, instead of after its heartbeat times out."""
        from elastimator.elastic.client import ShardClient
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

    def _drop_earlier_scale_request(self) -> None:
        """A scale request left in the model_dir by an earlier launch is not this one's: the command line's
        --workers wins (`scale` writes only to a launcher that runs, and this one has not said it does yet)."""
        path = scale_request_path(self.spec.model_dir)
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            return
        os.remove(path)
        try:
            asked = f"{int(json.loads(text)['workers'])} worker(s)"
        except (ValueError, KeyError, TypeError):
            asked = "an unreadable count"
        self._say("launcher", f"dropped the scale request for {asked} that an earlier launch left in {path}: "
                              f"--workers {self.spec.workers} on the command line wins")

    def _read_scale_request(self) -> int | None:
        path = scale_request_path(self.spec.model_dir)
        try:
            changed = os.stat(path).st_mtime
        except FileNotFoundError:
            return None
        if changed <= self._scale_seen:
            return None
        self._scale_seen = changed
        try:
            with open(path) as f:
                workers = int(json.load(f)["workers"])
        except (ValueError, KeyError, TypeError) as e:
            self._say("launcher", f"ignoring the scale request in {path}: {e!r}")
            return None
        return workers

    def _autoscale(self, now: float) -> supervision.Autoscaled | None:
        """What the autoscale policy answers to a new measurement (None: nothing measured yet)."""
        self._next_autoscale = now + self.spec.autoscale_every_secs
        ps_pids = [p.pid for n, p in self._processes.items() if n.startswith("ps-")]
        measurement = self._scaler.measure(now, self._job.alive_workers(), self.spec.model_dir, ps_pids)
        if measurement is None:
            return None
        decision = autoscale.decide(self._scaler.history, self.spec.autoscale)
        return supervision.Autoscaled(decision.workers, decision.reason)

    # --- records -----------------------------------------------------------------------------

    def _event(self, kind: str, task: str | None, **fields) -> None:
        with self._events_lock:
            self._events.append({"event": kind, "task": task, "time": self._clock(), **fields})

    def _say(self, source: str, text: str) -> None:
        with self._out_lock:
            self._out.write(f"[{source}] {text}\n")
            self._out.flush()

    def _write_state(self, running: bool = True) -> None:
        tasks = {name: p.pid for name, p in self._processes.items() if p.poll() is None}
        workers = self._job.target_workers if self._job is not None else self.spec.workers
        _write_json(state_path(self.spec.model_dir), {
            "running": running and not self._stop_asked(), "launcher_pid": os.getpid(),
            "workers": workers, "max_workers": self.plan.max_workers, "tasks": tasks,
            "shard_service": self.plan.shard_service})


def _popen(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A task's process: its own session, output piped (line by line) for the launcher to prefix and log."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                            errors="replace", bufsize=1, start_new_session=True, preexec_fn=_die_with_parent)


def _terminate(processes: list[subprocess.Popen], grace_secs: float) -> None:
    """SIGTERM to each, then SIGKILL to those still running after `grace_secs`."""
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + grace_secs
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
