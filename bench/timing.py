"""Timing the training steps of a benchmark run, after its warm-up."""

from __future__ import annotations

import multiprocessing
import threading
import time
import traceback

import tensorflow as tf


class WindowTimer(tf.compat.v1.train.SessionRunHook):
    """Times the steps after the first `warmup` ones."""

    def __init__(self, warmup: int):
        self.warmup, self.steps, self.start, self.stop = warmup, 0, None, None

    def after_run(self, run_context, run_values):
        self.steps += 1
        now = time.perf_counter()
        if self.steps == self.warmup:
            self.start = now
        self.stop = now

    def rate(self, batch_size: int = 1) -> float:
        """Steps (or, with batch_size, examples) per second after the warm-up."""
        return (self.steps - self.warmup) * batch_size / (self.stop - self.start)


class RoundRobin:
    """Trainers in threads take turns, one at a time: each trains `steps` steps, then passes to the next.

    On a busy machine throughput drifts by a third over minutes, so runs one after another compare different
    moments; turns of a second or two compare the same ones. A trainer's first turn (`warmup` steps) is not
    timed. Start each trainer's thread with `arrived(name)` waited for before the next (graph building is not
    safe to overlap, and must not load another's timed turn), then call `start()`.
    """

    def __init__(self, names, steps: int, warmup: int):
        self.names = list(names)
        self._steps, self._warmup = steps, warmup
        self._changed = threading.Condition()
        self._holder: str | None = None
        self._waiting: list[str] = []
        self._started = False
        self.turns: dict[str, list[tuple[int, float]]] = {name: [] for name in self.names}
        """Per trainer, (steps, seconds) of each timed turn."""

    def hook(self, name: str) -> tf.compat.v1.train.SessionRunHook:
        return _TurnHook(self, name)

    def arrived(self, name: str) -> bool:
        with self._changed:
            return name in self._waiting

    def start(self) -> None:
        with self._changed:
            self._started = True
            self._holder = self.names[0]
            self._changed.notify_all()

    def take(self, name: str) -> None:
        with self._changed:
            if name not in self._waiting:
                self._waiting.append(name)
                self._changed.notify_all()
            self._changed.wait_for(lambda: self._started and self._holder == name)

    def turn_length(self, turns_done: int) -> int:
        return self._warmup if turns_done == 0 else self._steps

    def give(self, name: str, leaving: bool = False) -> None:
        with self._changed:
            if self._holder == name:
                later = [n for n in self.names if n in self._waiting and (n != name or not leaving)]
                if later:
                    after = [n for n in later if self.names.index(n) > self.names.index(name)]
                    self._holder = (after or later)[0]
                else:
                    self._holder = None
            if leaving and name in self._waiting:
                self._waiting.remove(name)
            self._changed.notify_all()

    def rate(self, name: str, batch_size: int = 1) -> float:
        """Examples (or steps) per second over the trainer's timed turns."""
        turns = self.turns[name]
        return sum(steps for steps, _ in turns) * batch_size / sum(secs for _, secs in turns)


class _TurnHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, robin: RoundRobin, name: str):
        self._robin, self._name = robin, name
        self._turns = self._done = 0
        self._start: float | None = None

    def before_run(self, run_context):
        if self._start is None:
            self._robin.take(self._name)
            self._start, self._done = time.perf_counter(), 0

    def after_run(self, run_context, run_values):
        self._done += 1
        if self._done < self._robin.turn_length(self._turns):
            return
        if self._turns:
            self._robin.turns[self._name].append((self._done, time.perf_counter() - self._start))
        self._turns += 1
        self._start = None
        self._robin.give(self._name)

    def end(self, session):
        self._robin.give(self._name, leaving=True)


class ProcessRoundRobin:
    """Trainers in processes of their own take turns, one at a time, like RoundRobin's threads.

    Threads of one process share its allocator, thread pools and everything a contender leaves set for the
    process (TensorFlow's from_generator pins glibc's mmap threshold, for one): a cost one contender causes
    would be charged to all of them. Each trainer here runs `target(name, hook, *args)` in a fresh (spawned)
    process and trains with `hook`; this process hands out the turns and keeps the timings.
    """

    def __init__(self, names, steps: int, warmup: int):
        self.names = list(names)
        self._steps, self._warmup = steps, warmup
        self.turns: dict[str, list[tuple[int, float]]] = {name: [] for name in self.names}
        """Per trainer, (steps, seconds) of each timed turn."""

    def run(self, target, *args) -> None:
        """Runs every trainer to its end, in turns; raises the first trainer's failure."""
        context = multiprocessing.get_context("spawn")
        links, processes = {}, {}
        for name in self.names:
            here, there = context.Pipe()
            processes[name] = context.Process(target=_turn_taker, args=(target, name, there, self._steps,
                                                                         self._warmup, args), name=name)
            processes[name].start()
            there.close()
            links[name] = here
        try:
            waiting = {name for name in self.names if self._receive(name, links, processes) == "take"}
            while waiting:
                for name in [n for n in self.names if n in waiting]:
                    links[name].send("go")
                    message = self._receive(name, links, processes)
                    if message[0] == "turn":
                        _, steps, secs = message
                        if secs is not None:
                            self.turns[name].append((steps, secs))
                        message = self._receive(name, links, processes)
                    if message != "take":
                        waiting.discard(name)
        finally:
            for name, process in processes.items():
                process.join(timeout=60)
                if process.is_alive():
                    process.kill()

    @staticmethod
    def _receive(name, links, processes):
        try:
            message = links[name].recv()
        except EOFError:
            processes[name].join(timeout=10)
            raise RuntimeError(f"trainer {name} exited (code {processes[name].exitcode}) in the middle of "
                               "its turns") from None
        if message[0] == "failed":
            raise RuntimeError(f"trainer {name} failed:\n{message[1]}")
        return message

    def rate(self, name: str, batch_size: int = 1) -> float:
        """Examples (or steps) per second over the trainer's timed turns."""
        turns = self.turns[name]
        return sum(steps for steps, _ in turns) * batch_size / sum(secs for _, secs in turns)


def _turn_taker(target, name, link, steps, warmup, args) -> None:
    """A trainer process: runs the target with a hook that asks `link` for each turn."""
    try:
        target(name, _LinkedTurnHook(link, steps, warmup), *args)
        link.send(("done",))
    except BaseException:  # noqa: BLE001 - reported to the process handing out turns
        link.send(("failed", traceback.format_exc()))


class _LinkedTurnHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self, link, steps: int, warmup: int):
        self._link, self._steps, self._warmup = link, steps, warmup
        self._turns = self._done = 0
        self._start: float | None = None

    def before_run(self, run_context):
        if self._start is None:
            self._link.send("take")
            self._link.recv()
            self._start, self._done = time.perf_counter(), 0

    def after_run(self, run_context, run_values):
        self._done += 1
        if self._done < (self._warmup if self._turns == 0 else self._steps):
            return
        secs = time.perf_counter() - self._start if self._turns else None
        self._link.send(("turn", self._done, secs))
        self._turns += 1
        self._start = None
