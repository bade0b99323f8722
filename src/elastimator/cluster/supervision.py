"""Supervising a local job's processes, as data: states and events in, decisions out.

`step(job, events, now, policy)` is a pure function. It never starts, polls or
kills a process and never reads a clock; the launcher (`cluster/launcher.py`)
is the shell that does, turning what it sees into events and carrying out the
decisions. So every supervision scenario can be unit-tested with a number for
a clock and no process at all.

A child's life::

    STARTING --its server listens--> RUNNING --exit 0--> FINISHED
        |                               |
        +--------- exit != 0 -----------+--> RESTARTING --backoff over--> STARTING
        |                                        (or FAILED: exit 2 or 3, or out of restarts)
        +--> RETIRED: stopped on purpose (scaled down, still starting at the end, the job is over)

The rules:

* a death is restarted after `backoff_secs * 2**strikes`; a task's *strikes* are its restarts since the job last
  made progress, and a task with `max_restarts` strikes that dies again is given up on: a worker leaves its slot
  empty, any other task ends the job. So a crash loop gives up after `max_restarts` restarts, as a budget that
  never refills would, while a job that runs for days survives any number of faults with progress between them;
* progress, for a task: a checkpoint newer than the newest one when it was (re)started (`Checkpointed`), which a
  chief or worker must also have trained a step towards (`Stepped`: its progress file). It takes the task's
  strikes back to 0, and its backoff with them (a group's members each, in a synchronous job);
* exit 2 (usage) and exit 3 (a failure a restart would repeat) end the job at once;
* a task whose server does not listen within `start_timeout_secs` ends the job;
* a chief that fails after the parameter servers finished (they exit 0 only on the chief's word that training
  is over) is not restarted: the job ends with 1 and says so;
* once the chief has finished, nothing is restarted (but an evaluator that died
  while the job trained: it evaluates the final checkpoint); workers still starting are
  stopped, the others and the evaluator get `finish_timeout_secs`, then the
  parameter servers are stopped and the job ends (1 if the evaluator failed);
* a stop request (Ctrl-C, SIGTERM) ends the job with 130.

A synchronous job (`Policy.synchronous`: the chief and workers all-reduce, MultiWorkerMirroredStrategy) trains
as one group, which cannot go on without any of its members:

* a trainer that dies takes the group down: the others are stopped (the chief first) and the whole group starts
  again after the backoff, from the newest checkpoint (the chief's shard service rewinds to its seal); every
  member gets the group's strikes (its members' most) plus one, and a group out of restarts ends the job;
* a scale request stops the group (the chief first, which saves a checkpoint as it stops) and starts it again
  with the new number of workers, each TF_CONFIG naming them: the job goes on from that checkpoint.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Mapping, Sequence, Union

from elastimator.cluster.plan import Task
from elastimator.errors import REPEATING_EXIT, USAGE_EXIT


class State(enum.Enum):
    STARTING = "starting"
    """Started; its server does not listen yet."""
    RUNNING = "running"
    """Its server listens (or it has none)."""
    RESTARTING = "restarting"
    """Exited; starts again at `restart_at`."""
    FINISHED = "finished"
    """Exited 0, or a worker given up on (its slot left empty)."""
    FAILED = "failed"
    """Exited in a way that ends the job."""
    RETIRED = "retired"
    """Stopped on purpose: its exit is not a failure."""

    @property
    def alive(self) -> bool:
        """Whether the child has a process that runs."""
        return self in (State.STARTING, State.RUNNING)


@dataclasses.dataclass(frozen=True)
class Child:
    task: Task
    state: State
    started_at: float
    listens: bool
    """It runs a server (every task but the evaluator), which must accept connections within the start timeout."""
    restarts: int = 0
    """Restarts over the job's life (what the job's summary reports)."""
    restart_at: float | None = None
    exit_code: int | None = None
    strikes: int = 0
    """Restarts since the job last made progress (see the module doc): what counts against `max_restarts`, and
    sets the backoff."""
    resumed_from: int | None = None
    """The newest checkpoint's step when this process started: progress is a newer one."""
    stepped: bool = False
    """This process has trained a step (a trainer's progress file appeared)."""


@dataclasses.dataclass(frozen=True)
class Job:
    """Every child's state, the worker count asked for, and when the chief finished training."""

    children: Mapping[str, Child]
    target_workers: int
    chief_done_at: float | None = None
    checkpoint_step: int | None = None
    """The newest checkpoint's step seen (`Checkpointed`), None before the first."""

    def alive_workers(self) -> int:
        return sum(1 for c in self.children.values() if c.task.role == "worker" and c.state.alive)


@dataclasses.dataclass(frozen=True)
class Policy:
    max_restarts: int = 3
    """Restarts of a task (or a synchronous group) with no progress between them before it is given up on."""
    backoff_secs: float = 1.0
    start_timeout_secs: float = 120.0
    finish_timeout_secs: float = 180.0
    worker_slots: int = 1
    logs_dir: str = "logs"
    """Named in messages, so that a failure points at the task's log."""
    synchronous: bool = False
    """The chief and workers train as one group (see the module doc)."""


# --- events: what the shell saw ----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Exited:
    task: str
    code: int
    last_error: str | None = None
    """The last `elastimator: error:` line the task printed."""


@dataclasses.dataclass(frozen=True)
class Listening:
    task: str


@dataclasses.dataclass(frozen=True)
class ScaleTo:
    workers: int


@dataclasses.dataclass(frozen=True)
class Autoscaled:
    """The autoscale policy's answer at one measurement: how many workers it wants, and why."""

    workers: int
    reason: str


@dataclasses.dataclass(frozen=True)
class StopRequested:
    pass


@dataclasses.dataclass(frozen=True)
class Stalled:
    """A trainer that stepped before has made no step for `secs` (its progress file says so)."""

    task: str
    secs: float


@dataclasses.dataclass(frozen=True)
class Stepped:
    """A trainer's process trained its first step (its progress file appeared)."""

    task: str


@dataclasses.dataclass(frozen=True)
class Checkpointed:
    """The model_dir's newest checkpoint is now of `step`."""

    step: int


Event = Union[Exited, Listening, ScaleTo, Autoscaled, StopRequested, Stalled, Stepped, Checkpointed]


# --- decisions: what the shell does --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Start:
    task: Task
    restart: int
    """0 for a first start (or a fresh one, after scaling up)."""


@dataclasses.dataclass(frozen=True)
class Stop:
    """Terminate the task's process and wait for it."""

    task: Task
    return_shards: bool
    """A worker stopped while the job trains: hand its shards back now, not at its heartbeat timeout."""


@dataclasses.dataclass(frozen=True)
class Kill:
    task: Task


@dataclasses.dataclass(frozen=True)
class Say:
    text: str


@dataclasses.dataclass(frozen=True)
class Record:
    """An entry for the launcher's event list."""

    event: str
    task: str | None
    fields: Mapping = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class End:
    code: int


Decision = Union[Start, Stop, Kill, Say, Record, End]


def begin(tasks: Sequence[Task], workers: int, now: float,
          checkpoint_step: int | None = None) -> tuple[Job, list[Decision]]:
    """The job's first state, with every task starting (from the checkpoint of `checkpoint_step`, if any)."""
    children = {t.name: _started(t, now, 0, resumed_from=checkpoint_step) for t in tasks}
    return Job(children, workers, checkpoint_step=checkpoint_step), [Start(t, 0) for t in tasks]


def _started(task: Task, now: float, restarts: int, strikes: int = 0, resumed_from: int | None = None) -> Child:
    listens = task.role != "evaluator"
    return Child(task, State.STARTING if listens else State.RUNNING, now, listens, restarts=restarts,
                 strikes=strikes, resumed_from=resumed_from)


def scale_refused(workers: int, worker_slots: int) -> str | None:
    """Why a request for `workers` workers cannot be carried out (None: it can)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 0 <= workers <= worker_slots:
        return f"the job has {worker_slots} worker slot(s); asked for {workers!r}"
    return None


def stop_order(names: Sequence[str], synchronous: bool = False) -> list[list[str]]:
    """The tasks to end, in the order to end them: the trainers first, whose last step and checkpoint need the
    parameter servers, then the parameter servers. In a synchronous job the chief goes first, alone: it stops
    after a step every worker took part in and saves it, where the workers stopped at the same time could
    leave it waiting in a step for one that stopped before it."""
    trainers = [name for name in names if not name.startswith("ps-")]
    servers = [name for name in names if name.startswith("ps-")]
    if synchronous:
        chief = [name for name in trainers if name.startswith("chief-")]
        return [group for group in (chief, [n for n in trainers if n not in chief], servers) if group]
    return [group for group in (trainers, servers) if group]


def progressed(resumed_from: int | None, newest: int | None) -> bool:
    """Whether the job made progress since a process started from the checkpoint of step `resumed_from` (None:
    there was none): the newest checkpoint is of a later step. The one rule of the restart budget, here and in a
    Kubernetes pod (cluster/pod_budget.py)."""
    return newest is not None and (resumed_from is None or newest > resumed_from)


def step(job: Job, events: Sequence[Event], now: float, policy: Policy) -> tuple[Job, list[Decision]]:
    """What to do about `events` at time `now`. The decisions end with `End` when the job is over."""
    turn = _Turn(job, now, policy)
    turn.run(events)
    return turn.job(), turn.decisions


def _killed_first(event: Event) -> int:
    """Orders one turn's events so that exits by a signal come first (a stable sort keeps the rest in order).

    A process killed from outside (SIGKILL, the OOM killer) is the cause; a synchronous group's other members exit
    with a code moments later, reacting to the lost all-reduce. When the launcher sees them in one turn, the
    restart is the killed one's.
    """
    return 0 if isinstance(event, Exited) and event.code < 0 else 1


class _Turn:
    """One call of `step`: a working copy of the children and the decisions so far."""

    def __init__(self, job: Job, now: float, policy: Policy):
        self.children = dict(job.children)
        self.target, self.chief_done_at, self.checkpoint_step = job.target_workers, job.chief_done_at, \
            job.checkpoint_step
        self.now, self.policy = now, policy
        self.decisions: list[Decision] = []
        self.ended = False

    def job(self) -> Job:
        return Job(self.children, self.target, self.chief_done_at, self.checkpoint_step)

    def run(self, events: Sequence[Event]) -> None:
        if any(isinstance(e, StopRequested) for e in events):
            return self._end(130)
        for event in sorted(events, key=_killed_first):
            if isinstance(event, ScaleTo):
                self._scale(event.workers)
            elif isinstance(event, Autoscaled):
                self._autoscaled(event)
            elif isinstance(event, Listening):
                self._listening(event.task)
            elif isinstance(event, Exited):
                self._exited(event)
            elif isinstance(event, Stalled):
                self._stalled(event)
            elif isinstance(event, Stepped):
                self._stepped(event.task)
            elif isinstance(event, Checkpointed):
                self._checkpointed(event.step)
            if self.ended:
                return None
        self._timers()
        if not self.ended and self.chief_done_at is not None:
            self._finish_when_ready()
        return None

    # --- small steps ---------------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        self.decisions.append(Say(text))

    def _record(self, event: str, task: str | None, **fields) -> None:
        self.decisions.append(Record(event, task, fields))

    def _end(self, code: int) -> None:
        self.decisions.append(End(code))
        self.ended = True

    def _set(self, name: str, **changes) -> Child:
        child = self.children[name] = dataclasses.replace(self.children[name], **changes)
        return child

    def _log(self, name: str) -> str:
        return f"{self.policy.logs_dir}/{name}.log"

    def _start(self, task: Task, fresh: bool) -> None:
        old = self.children.get(task.name)
        restarts, strikes = (0, 0) if fresh or old is None else (old.restarts, old.strikes)
        self.children[task.name] = _started(task, self.now, restarts, strikes, self.checkpoint_step)
        self.decisions.append(Start(task, restarts))

    def _retire(self, child: Child) -> None:
        if child.state.alive:
            training = self.chief_done_at is None
            self.decisions.append(Stop(child.task, return_shards=training and child.task.role == "worker"))
        self._set(child.task.name, state=State.RETIRED, restart_at=None)

    # --- events ---------------------------------------------------------------------------------------

    def _autoscaled(self, event: Autoscaled) -> None:
        self._record("autoscale", None, workers=event.workers, reason=event.reason)
        if event.workers != self.target:
            self._say(f"autoscale: {event.reason}")
            self._scale(event.workers)

    def _scale(self, workers: int) -> None:
        refused = scale_refused(workers, self.policy.worker_slots)
        if refused is not None:
            self._say(f"ignoring a request for {workers} worker(s): {refused}")
            return
        self._record("scale", None, workers=workers, before=self.target)
        self._say(f"scaling to {workers} worker(s) (from {self.target})")
        if self.policy.synchronous:
            return None if workers == self.target else self._regroup(workers)
        self.target = workers
        for index in range(self.policy.worker_slots):
            task = Task("worker", index)
            child = self.children.get(task.name)
            if index < workers and self.chief_done_at is None:
                if child is None or child.state in (State.RETIRED, State.FINISHED):
                    self._start(task, fresh=True)
            elif index >= workers and child is not None and child.state in (
                    State.STARTING, State.RUNNING, State.RESTARTING):
                self._retire(child)

    def _listening(self, name: str) -> None:
        if self.children[name].state is State.STARTING:
            self._set(name, state=State.RUNNING)
            self._record("up", name)

    def _parameter_servers_finished(self) -> bool:
        """Whether a parameter server exited 0: it does only once the chief has told it training is over."""
        return any(c.task.role == "ps" and c.state is State.FINISHED and c.exit_code == 0
                   for c in self.children.values())

    def _exited(self, event: Exited) -> None:
        child = self.children[event.task]
        if not child.state.alive:
            return
        name, role, code = event.task, child.task.role, event.code
        child = self._set(name, exit_code=code)
        self._record("exit", name, code=code)
        if code == 0 or (self.chief_done_at is not None and role in ("worker", "evaluator")):
            self._set(name, state=State.FINISHED)
            if role == "chief" and code == 0:
                self.chief_done_at = self.now
                self._say("the chief finished training")
        elif code == USAGE_EXIT:
            self._set(name, state=State.FAILED)
            self._say(f"usage error: {name} exited with code 2 (an invalid conf or bad arguments); not restarting "
                      f"it. See {self._log(name)}.")
            self._end(USAGE_EXIT)
        elif code == REPEATING_EXIT:
            self._set(name, state=State.FAILED)
            self._say(f"{name} failed in a way a restart would repeat, so the job ends here: "
                      f"{event.last_error or 'see its log'} (log: {self._log(name)})")
            self._end(1)
        elif role == "chief" and self._parameter_servers_finished():
            self._set(name, state=State.FAILED)
            self._say(f"{name} exited with code {code} after training ended (the parameter servers had finished on "
                      f"its word); not restarting it: a restarted chief would have no parameter servers. The model "
                      f"and its checkpoints are in the model_dir; see {self._log(name)}.")
            self._end(1)
        elif self.policy.synchronous and role in ("chief", "worker"):
            self._group_failed(child, code)
        elif child.strikes >= self.policy.max_restarts and role == "worker":
            self._set(name, state=State.FINISHED)
            self._say(f"{name} failed {child.strikes + 1} times {self._no_progress()}; leaving its slot empty")
        elif child.strikes >= self.policy.max_restarts:
            self._set(name, state=State.FAILED)
            self._say(f"{name} exited with code {code} and was already restarted {child.strikes} time(s) "
                      f"{self._no_progress()}; giving up. See {self._log(name)}.")
            self._end(1)
        else:
            delay = self.policy.backoff_secs * 2 ** child.strikes
            child = self._set(name, state=State.RESTARTING, restarts=child.restarts + 1, strikes=child.strikes + 1,
                              restart_at=self.now + delay)
            self._record("restart", name, code=code, delay_secs=delay, strikes=child.strikes)
            self._say(f"{name} exited with code {code}; restarting it in {delay:.1f}s "
                      f"(restart {child.strikes} of {self.policy.max_restarts} without progress)")

    def _no_progress(self) -> str:
        """Why the restarts so far count: what the job had not done between them."""
        newest = "any checkpoint" if self.checkpoint_step is None else f"a checkpoint after step {self.checkpoint_step}"
        return f"with no progress between them (not {newest})"

    # --- progress: what gives a restart budget back ------------------------------------------------------

    def _stepped(self, name: str) -> None:
        child = self.children.get(name)
        if child is not None and child.state.alive:
            self._set(name, stepped=True)

    def _checkpointed(self, step: int) -> None:
        """A newer checkpoint: every live task started from an older one (and, a trainer, that trained since) has
        made progress, and its strikes go back to 0."""
        if not progressed(self.checkpoint_step, step):
            return None
        self.checkpoint_step = step
        refilled = [c.task.name for c in self.children.values()
                    if c.strikes and c.state.alive and progressed(c.resumed_from, step)
                    and (c.stepped or c.task.role not in ("chief", "worker"))]
        for name in refilled:
            self._set(name, strikes=0)
        if refilled:
            self._record("progress", None, step=step, refilled=refilled)
            self._say(f"checkpoint {step}: the job made progress since the restart of {', '.join(refilled)}; "
                      f"{'its' if len(refilled) == 1 else 'their'} restarts count from 0 again")
        return None

    # --- a synchronous group -----------------------------------------------------------------------------

    def _trainers(self) -> list[Child]:
        """The group's members that run or are to run (the chief and the first `target` workers), chief first."""
        return [c for c in self.children.values()
                if c.task.role == "chief" or (c.task.role == "worker" and c.task.index < self.target)]

    def _stop_group(self, but: str | None = None) -> None:
        """Stops every live member (but `but`, which has exited), the chief first (stop_order)."""
        live = [c.task.name for c in self._trainers() if c.state.alive and c.task.name != but]
        for group in stop_order(live, synchronous=True):
            for name in group:
                self.decisions.append(Stop(self.children[name].task, return_shards=False))

    def _stalled(self, event: Stalled) -> None:
        """A synchronous group whose trainer makes no step (a frozen process: its port still answers, so no probe
        sees it) waits in its all-reduce forever: the group is stopped (a frozen member killed) and started again.
        A parameter-server job's trainers do not wait on each other: nothing to do."""
        child = self.children.get(event.task)
        if not self.policy.synchronous or child is None or child.state is not State.RUNNING \
                or child.task.role not in ("chief", "worker") or self.chief_done_at is not None:
            return None
        return self._group_failed(child, None, why=f"made no training step for {event.secs:.0f} s (a frozen "
                                                    f"process, or a peer it waits on)")

    def _group_failed(self, child: Child, code: int | None, why: str | None = None) -> None:
        what = why or f"exited with code {code}"
        strikes = max(c.strikes for c in self._trainers())
        if strikes >= self.policy.max_restarts:
            self._set(child.task.name, state=State.FAILED)
            self._say(f"{child.task.name} {what}, and the group of chief and workers was already "
                      f"started again {strikes} time(s) {self._no_progress()}; giving up. "
                      f"See {self._log(child.task.name)}.")
            return self._end(1)
        delay = self.policy.backoff_secs * 2 ** strikes
        self._stop_group(but=child.task.name if code is not None else None)
        for member in self._trainers():
            self._set(member.task.name, state=State.RESTARTING, restarts=member.restarts + 1, strikes=strikes + 1,
                      restart_at=self.now + delay)
        self._record("restart", child.task.name, code=code, delay_secs=delay, group=True, strikes=strikes + 1,
                     **({"stalled": True} if code is None else {}))
        self._say(f"{child.task.name} {what}; a synchronous step needs every worker, so the chief "
                  f"and workers start again in {delay:.1f}s from the newest checkpoint "
                  f"(restart {strikes + 1} of {self.policy.max_restarts} without progress)")
        return None

    def _regroup(self, workers: int) -> None:
        """Stops the group and starts it again with `workers` workers, from the checkpoint the chief saves as it
        stops. Restart counts stay: this is no failure."""
        if self.chief_done_at is not None:
            self.target = workers
            return
        self._stop_group()
        for child in self._trainers():
            if child.task.role == "worker" and child.task.index >= workers:
                self._set(child.task.name, state=State.RETIRED, restart_at=None)
        self.target = workers
        for index in range(workers):
            task = Task("worker", index)
            if task.name not in self.children:
                self.children[task.name] = _started(task, self.now, restarts=0)
        for child in self._trainers():
            self._set(child.task.name, state=State.RESTARTING, restart_at=self.now)
        return None

    # --- time ------------------------------------------------------------------------------------------

    def _timers(self) -> None:
        if self.chief_done_at is not None:
            # Nothing dead after the chief restarts, and nothing still starting can fail the job; but an evaluator
            # that died while the job trained still starts, to evaluate the final checkpoint.
            for child in list(self.children.values()):
                if child.task.role == "evaluator" and child.state is State.RESTARTING and self.now >= child.restart_at:
                    self._start(child.task, fresh=False)
            return None
        for child in list(self.children.values()):
            if child.state is State.RESTARTING and self.now >= child.restart_at:
                self._start(child.task, fresh=False)
            elif (child.state is State.STARTING and child.listens
                  and self.now - child.started_at > self.policy.start_timeout_secs):
                self.decisions.append(Kill(child.task))
                self._set(child.task.name, state=State.FAILED)
                self._say(f"{child.task.name} did not start: its server never listened within "
                          f"{self.policy.start_timeout_secs:.0f}s. See {self._log(child.task.name)}.")
                return self._end(1)
        return None

    def _finish_when_ready(self) -> None:
        for child in list(self.children.values()):
            if child.task.role == "worker" and child.state is State.STARTING:
                self._say(f"{child.task.name} was still starting when the chief finished; stopping it, there is "
                          "nothing left for it to train")
                self._retire(child)
        waiting = [c for c in self.children.values() if c.task.role in ("worker", "evaluator") and c.state.alive
                   or c.task.role == "evaluator" and c.state is State.RESTARTING]
        if waiting and self.now - self.chief_done_at <= self.policy.finish_timeout_secs:
            return
        for child in waiting:
            self._say(f"{child.task.name} has not finished {self.policy.finish_timeout_secs:.0f}s after the chief; "
                      "stopping it")
            self._retire(child)
        for child in list(self.children.values()):
            if child.task.role == "ps" and child.state is not State.RETIRED:
                self._retire(child)
        evaluator = self.children.get(Task("evaluator").name)
        failed = evaluator is not None and (evaluator.exit_code not in (0, None)
                                            or any(c.task == evaluator.task for c in waiting))
        self._end(1 if failed else 0)
