"""Timing the training steps of a benchmark run, after its warm-up."""

from __future__ import annotations

import multiprocessing
import random
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

import tensorflow as tf


def in_fresh_processes(target, *args):
    """`target(*args)` in a fresh (spawned) process of its own; its result. Nothing one contender sets for its
    process (thread pools, allocator settings, the elastimator version it imports) reaches another."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(target, *args).result()


def shuffled_rounds(names, rounds: int):
    """Each round's order of `names`: shuffled, seeded by the round, so that no contender always follows the
    same one."""
    for round_ in range(rounds):
        order = list(names)
        random.Random(round_).shuffle(order)
        yield order


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
    """Trainers take turns, one at a time: each trains `steps` steps, then passes to the next.

    On a busy machine throughput drifts by a third over minutes, so runs one after another compare different
    moments; turns of a second or two compare the same ones. A trainer's first turn (`warmup` steps) is not
    timed. Each trainer runs `target(name, hook, *args)` in a fresh (spawned) process of its own and trains
    with `hook`; this process hands out the turns and keeps the timings. (Threads of one process would share
    its allocator, thread pools and whatever a contender sets for its whole process, e.g. the mmap threshold
    TensorFlow's from_generator pins: a cost one contender causes would be charged to all of them.)

    With `seed`, each cycle of turns goes in a fresh random order: in a fixed order a trainer always follows the
    same one, and whatever that one leaves running as its turn ends (threads, another process's work) is
    charged to the same neighbour every time.
    """

    def __init__(self, names, steps: int, warmup: int, seed: int | None = None):
        self.names = list(names)
        self._steps, self._warmup = steps, warmup
        self._order = random.Random(seed) if seed is not None else None
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
                cycle = [n for n in self.names if n in waiting]
                if self._order is not None:
                    self._order.shuffle(cycle)
                for name in cycle:
                    links[name].send("go")
                    message = self._receive(name, links, processes)
                    if message[0] == "turn":
                        _, steps, secs = message
                        if secs is not None:
                            self.turns[name].append((steps, secs))
                        message = self._receive(name, links, processes)
                    if message != "take":
                        waiting.discard(name)
                        processes[name].join()  # its exit must not overlap the next trainer's turn
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
