"""Automatic worker scaling: a pure policy from measurements to a decision, and what measures for it.

The policy adds a worker while the last one added paid for itself and the
parameter servers have CPU to spare; it removes one when the parameter servers
are saturated, or when the last worker added brought (almost) nothing. It
holds for a cooldown after every change, so each worker count is measured
before the next move.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One look at a running job."""

    time: float
    """Seconds (any monotonic origin)."""
    workers: int
    """Workers running (the chief not counted)."""
    steps_per_sec: float
    """Global steps per second of the whole job."""
    ps_cpu: float
    """Busiest parameter server's CPU use, as a fraction of this machine's cores (0 to 1)."""


@dataclasses.dataclass(frozen=True)
class ScalingLimits:
    """The bounds and thresholds the policy works within."""

    min_workers: int = 0
    max_workers: int = 4
    ps_cpu_high: float = 0.85
    """Above this the parameter servers are the bottleneck: more workers only queue."""
    min_gain: float = 0.25
    """The last worker added must raise steps/s by this fraction of one trainer's share, or it goes."""
    cooldown_secs: float = 60.0

    def __post_init__(self):
        if not 0 <= self.min_workers <= self.max_workers:
            raise ValueError(f"need 0 <= min_workers <= max_workers; got {self.min_workers}, {self.max_workers}.")


@dataclasses.dataclass(frozen=True)
class Decision:
    workers: int
    reason: str


def _steady(history: Sequence[Measurement], workers: int) -> list[Measurement]:
    """The latest unbroken run of measurements taken with `workers` workers."""
    run: list[Measurement] = []
    for m in reversed(history):
        if m.workers != workers:
            break
        run.append(m)
    return run


def _mean_rate(measurements: Sequence[Measurement]) -> float:
    return sum(m.steps_per_sec for m in measurements) / len(measurements)


def decide(history: Sequence[Measurement], limits: ScalingLimits) -> Decision:
    """How many workers to run next, and why; `history` is oldest first."""
    if not history:
        return Decision(limits.min_workers, "no measurement yet")
    now = history[-1]
    current = now.workers
    if current < limits.min_workers or current > limits.max_workers:
        target = min(max(current, limits.min_workers), limits.max_workers)
        return Decision(target, f"{current} worker(s) is outside [{limits.min_workers}, {limits.max_workers}]")
    same = _steady(history, current)
    if now.time - same[-1].time < limits.cooldown_secs:
        return Decision(current, f"holding: {current} worker(s) measured for less than {limits.cooldown_secs:.0f}s")
    if now.ps_cpu >= limits.ps_cpu_high:
        if current > limits.min_workers:
            return Decision(current - 1, f"parameter servers at {now.ps_cpu:.0%} CPU: removing a worker")
        return Decision(current, f"parameter servers at {now.ps_cpu:.0%} CPU, already at the minimum")
    rate = _mean_rate(same)
    before = _steady(history[:len(history) - len(same)], current - 1) if len(same) < len(history) else []
    if before:
        previous = _mean_rate(before)
        share = previous / current  # one trainer's share before the last worker joined (chief + workers - 1)
        gain = rate - previous
        if gain < limits.min_gain * share:
            return Decision(current - 1 if current > limits.min_workers else current,
                            f"the last worker added {gain:+.2f} steps/s, under {limits.min_gain:.0%} of a "
                            f"trainer's share ({share:.2f}): removing it")
    if current < limits.max_workers:
        return Decision(current + 1, f"{rate:.2f} steps/s with {current} worker(s), ps at {now.ps_cpu:.0%} CPU: "
                                     "adding a worker")
    return Decision(current, f"at the maximum of {limits.max_workers} worker(s)")


class Tracker:
    """Measures a launched job: global steps/s from the chief's summaries, ps CPU from /proc."""

    def __init__(self):
        self.history: list[Measurement] = []
        self._cpu_seen: dict[int, tuple[float, float]] = {}

    def measure(self, now: float, workers: int, model_dir: str, ps_pids: Sequence[int]) -> Measurement | None:
        rate = latest_steps_per_sec(model_dir)
        cpu = max((self._cpu_fraction(pid, now) for pid in ps_pids), default=0.0)
        if rate is None:
            return None
        measurement = Measurement(now, workers, rate, cpu)
        self.history.append(measurement)
        return measurement

    def _cpu_fraction(self, pid: int, now: float) -> float:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        used = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        last = self._cpu_seen.get(pid)
        self._cpu_seen[pid] = (now, used)
        if last is None or now <= last[0]:
            return 0.0
        return (used - last[1]) / (now - last[0]) / (os.cpu_count() or 1)


def latest_steps_per_sec(model_dir: str) -> float | None:
    """The newest `global_step/sec` the chief wrote to model_dir's events (None before the first)."""
    import tensorflow as tf

    latest = None
    for path in sorted(glob.glob(os.path.join(model_dir, "events.out.tfevents.*")), key=os.path.getmtime)[-1:]:
        try:
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    if value.tag == "global_step/sec" and value.HasField("simple_value"):
                        latest = value.simple_value
        except tf.errors.DataLossError:
            pass  # the chief is writing the last record; what was read so far stands
    return latest
