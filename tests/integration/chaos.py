"""Seeded random schedules of faults, landed on a job that `Launcher` runs (for test_chaos.py).

A schedule is data: `schedule(seed, ...)` draws it and `describe` prints it, so a failing run is replayed with its
seed (CHAOS_SEED=N). Each fault lands on its task's current process:

* kill: SIGKILL;
* freeze: SIGSTOP, then SIGCONT `hold_secs` later (the next fault may land meanwhile);
* cut: the task's network down for `hold_secs`, then up again (a `cut(task, up)` the test gives: each task in a
  network namespace of its own).

When a fault lands is a matter of the job's progress, not of time, so a loaded machine sees the same schedule: a
fault lands once the job's global step reaches its `at_step`, or, a follow-up, `after_secs` after the fault before
it, while the job still recovers from that one. One rule keeps a schedule within what the restart budget
promises (docs/jobs.md): no fault lands while a task has `max_restarts - 1` restarts with no progress since (the
last restart left as a spare for a fault that takes a second task down with it); it waits for the job's next
checkpoint.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import random
import signal
import threading
import time
from typing import Callable, Sequence

from elastimator.cluster.launcher import Launcher

KINDS = ("kill", "freeze", "cut")


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    task: str
    at_step: int | None
    """Lands once the job's global step reaches this (None: a follow-up, `after_secs` after the fault before)."""
    after_secs: float = 0.0
    hold_secs: float = 0.0
    """How long a freeze or cut lasts."""

    def __str__(self) -> str:
        when = f"at step {self.at_step}" if self.at_step is not None else f"{self.after_secs:.1f} s after the last"
        hold = f" for {self.hold_secs:.1f} s" if self.kind != "kill" else ""
        return f"{self.kind} {self.task}{hold}, {when}"


def schedule(seed: int, count: int, tasks: Sequence[str], steps: int, kinds: Sequence[str] = ("kill", "freeze"),
             cut_tasks: Sequence[str] = (), follow_up: float = 0.35, hold: tuple[float, float] = (8.0, 25.0),
             cut_hold: tuple[float, float] = (10.0, 40.0)) -> list[Fault]:
    """`count` faults over the first 85% of a job of `steps` global steps, each a random kind on a random task
    (a cut only on `cut_tasks`); each fault after the first is, with probability `follow_up`, a follow-up 1-6 s
    after the one before."""
    rng = random.Random(seed)
    targets = sorted(rng.sample(range(int(0.1 * steps), int(0.85 * steps)), count))
    faults = []
    for index, at_step in enumerate(targets):
        kind = rng.choice([k for k in kinds if k != "cut" or cut_tasks])
        task = rng.choice(list(cut_tasks if kind == "cut" else tasks))
        held = rng.uniform(*(cut_hold if kind == "cut" else hold)) if kind != "kill" else 0.0
        if index and rng.random() < follow_up:
            faults.append(Fault(kind, task, None, after_secs=rng.uniform(1.0, 6.0), hold_secs=held))
        else:
            faults.append(Fault(kind, task, at_step, hold_secs=held))
    return faults


def describe(seed: int, faults: Sequence[Fault]) -> str:
    return "\n".join([f"chaos schedule (seed {seed}, CHAOS_SEED={seed} replays it):",
                      *(f"  {i + 1}. {fault}" for i, fault in enumerate(faults))])


@dataclasses.dataclass
class Landed:
    fault: Fault
    step: int
    """The job's global step as it landed."""
    pid: int


class Chaos:
    """Lands a schedule's faults on the job `launcher` runs, from a thread of its own, until `over()`."""

    def __init__(self, launcher: Launcher, faults: Sequence[Fault], max_restarts: int, over: Callable[[], bool],
                 cut: Callable[[str, bool], None] | None = None):
        self.launcher, self.faults, self.max_restarts, self.over, self.cut = launcher, faults, max_restarts, over, cut
        self.landed: list[Landed] = []
        self._held: dict[str, float] = {}
        """Tasks frozen or cut, with when they are released (time.monotonic)."""
        self._frozen: dict[str, int] = {}
        self._cut: set[str] = set()
        self._step = 0
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._done = threading.Event()

    def start(self) -> "Chaos":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops landing faults and releases every task still frozen or cut."""
        self._done.set()
        self._thread.join(timeout=60)
        for task in list(self._held):
            self._release(task)

    # --- what the job is doing ---------------------------------------------------------------------------

    def step(self) -> int:
        """The highest global step the job has reached: its checkpoints and its trainers' progress files."""
        steps = [e["step"] for e in self.launcher.events if e["event"] == "checkpoint"]
        for path in glob.glob(os.path.join(self.launcher.logs_dir, "*.progress.json")):
            try:
                with open(path) as f:
                    steps.append(int(json.load(f)["step"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass
        self._step = max([self._step, *steps])
        return self._step

    def _process(self, task: str) -> int | None:
        """The pid of the task's process, while it runs."""
        events = [e for e in self.launcher.events if e["task"] == task and e["event"] in ("start", "exit")]
        return events[-1]["pid"] if events and events[-1]["event"] == "start" else None

    def _chief_finished(self) -> bool:
        return any(e["event"] == "exit" and e["task"] == "chief-0" and e["code"] == 0 for e in self.launcher.events)

    def _budget_allows(self) -> bool:
        return max(self.launcher.strikes().values(), default=0) < self.max_restarts - 1

    # --- landing -------------------------------------------------------------------------------------------

    def _run(self) -> None:
        self._land_all()
        # A task frozen or cut when the chief finished is released on time too: the job waits for it to finish.
        while self._held and not self._done.wait(0.2):
            self._release_due()

    def _land_all(self) -> None:
        last = time.monotonic()
        for fault in self.faults:
            while True:
                if self._done.is_set() or self.over() or self._chief_finished():
                    return
                self._release_due()
                now = time.monotonic()
                due = (self.step() >= fault.at_step) if fault.at_step is not None else now - last >= fault.after_secs
                pid = self._process(fault.task)
                if due and pid is not None and fault.task not in self._held and self._budget_allows():
                    break
                self._done.wait(0.2)
            self._land(fault, pid)
            last = time.monotonic()

    def _release_due(self) -> None:
        now = time.monotonic()
        for task, until in list(self._held.items()):
            if now >= until:
                self._release(task)

    def _land(self, fault: Fault, pid: int) -> None:
        print(f"chaos: {fault} (landing at step {self._step}, pid {pid})", flush=True)
        self.landed.append(Landed(fault, self._step, pid))
        if fault.kind == "kill":
            _signal(pid, signal.SIGKILL)
        elif fault.kind == "freeze":
            _signal(pid, signal.SIGSTOP)
            self._frozen[fault.task] = pid
            self._held[fault.task] = time.monotonic() + fault.hold_secs
        elif fault.kind == "cut":
            self.cut(fault.task, False)
            self._cut.add(fault.task)
            self._held[fault.task] = time.monotonic() + fault.hold_secs

    def _release(self, task: str) -> None:
        self._held.pop(task, None)
        if task in self._frozen:
            _signal(self._frozen.pop(task), signal.SIGCONT)  # gone already where the launcher killed it
        if task in self._cut:
            self._cut.discard(task)
            self.cut(task, True)

    def summary(self) -> str:
        return "\n".join(f"  landed: {landed.fault} (at step {landed.step})" for landed in self.landed) or \
            "  landed: none"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
