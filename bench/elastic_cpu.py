"""Where elastic input's CPU goes: per step, by thread, in the trainer and in the shard service's process.

elastic_input.py measures what elastic input costs in examples/s, and elastic_step_trace.py where the time
goes inside a step. On two cores every thread that runs takes a core from the step's, so this counts CPU
time, from /proc (per thread), over `--steps` untraced steps after `--warmup`, and the wall time the host
spends between two session calls (the hooks, where a worker sends its report):
  trainer            the training process, by thread: `tf_compute` (TensorFlow's op pools: the step's ops, the
                     write gate's numpy_function among them), `main` (the session call's host work and every
                     hook: the report's send), `python_threads` (started by Python: the feed's heartbeat),
                     `grpc` (gRPC's own), `other` (unnamed native threads: tf.data's, its Python readers too)
  service            the remote shard service's process (elastic_remote only), all of its threads
Contenders, each trained in a fresh process, one step per call, rounds in a shuffled order:
  file_reader      the plain FileReader pipeline
  elastic          the shard service in the training process (chief, local job)
  elastic_remote   the service in another process, reports and requests over its report line (workers)
With `--against REV`, elastic@REV and elastic_remote@REV run the code of git revision REV (a worktree).

`input alone`: the CPU per batch of each contender's input pipeline iterated on its own (no model, no
reports), in a process of its own.

The figures are medians over the rounds. CPU on the step's own path (`host`, the main thread's) costs wall time
one for one; another thread's costs it only as far as it takes a core the step's ops wanted. elastic_input.md
gives the examples/s.

Run:  python bench/elastic_cpu.py [--rows 200000] [--warmup 200] [--steps 1000] [--rounds 3] [--against REV]
Results go to bench/results/elastic_cpu.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "criteo"))

import tensorflow as tf  # noqa: E402

import elastic_input  # noqa: E402
from elastic_step_trace import CONTENDERS  # noqa: E402
from report import RESULTS, write_results  # noqa: E402
from timing import in_fresh_processes, shuffled_rounds  # noqa: E402

GROUPS = ("tf_compute", "main", "python_threads", "grpc", "other")
"""The trainer's threads, grouped: see the module doc."""
_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int | str = "self") -> dict[int, tuple[str, float]]:
    """Per thread of process `pid`: (its name, seconds it has run), from the scheduler's nanosecond count where
    the kernel keeps one, else from /proc's ticks (user + system)."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        task = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{task}/stat") as f:
                head, _, rest = f.read().rpartition(")")
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        try:
            with open(f"{task}/schedstat") as f:
                ran_ns = int(f.read().split()[0])
        except FileNotFoundError:  # no schedstats in this kernel, or the thread ended since: its ticks serve
            ran_ns = 0
        fields = rest.split()
        seconds = ran_ns / 1e9 if ran_ns else (int(fields[11]) + int(fields[12])) / _TICK
        threads[int(tid)] = (head.partition("(")[2], seconds)
    return threads


def child_processes() -> list[int]:
    """The processes this one started (the remote shard service)."""
    children = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            children += [int(pid) for pid in f.read().split()]
    return children


def group_of(name: str, tid: int, python_threads: set[int]) -> str:
    """A trainer thread's group, by its kernel name, else by who started it."""
    if name.startswith("tf_Compute"):
        return "tf_compute"  # TensorFlow's op pools: the step's ops, its numpy_function gate among them
    if name in ("event_engine", "lifeguard") or name.startswith("grpc"):
        return "grpc"
    if tid == os.getpid():
        return "main"  # the session call's host work and every hook
    if tid in python_threads:
        return "python_threads"  # started by Python: the feed's heartbeat
    return "other"  # unnamed native threads: tf.data's (its Python readers too), TensorFlow's runtime


class CallEnd(tf.compat.v1.train.SessionRunHook):
    """The first hook: its after_run is the first thing the host runs as a session call returns."""

    def __init__(self):
        self.at = 0.0

    def after_run(self, run_context, run_values):
        self.at = time.perf_counter()


class CpuWindow(tf.compat.v1.train.SessionRunHook):
    """The last hook: counts CPU per thread (and the remote service's) over the calls after the first `warmup`,
    and the wall time the host spends outside the session calls (hooks and MonitoredSession's own work: the
    step's serial host path); stops training `steps` calls later."""

    def __init__(self, warmup: int, steps: int, call_end: CallEnd):
        self._warmup, self._steps, self._calls = warmup, steps, 0
        self._call_end = call_end
        self._call_start = 0.0
        self._in_calls = 0.0
        self.per_step: dict[str, float] = {}

    def before_run(self, run_context):
        self._call_start = time.perf_counter()

    def after_run(self, run_context, run_values):
        self._calls += 1
        if self._calls > self._warmup:
            self._in_calls += self._call_end.at - self._call_start
        if self._calls == self._warmup:
            self._services = child_processes()
            self._start = (time.perf_counter(), thread_cpu(), self._service_cpu())
        elif self._calls == self._warmup + self._steps:
            self._finish(time.perf_counter(), thread_cpu(), self._service_cpu())
            run_context.request_stop()

    def _service_cpu(self) -> float:
        return sum(seconds for pid in self._services for _, seconds in thread_cpu(pid).values())

    def _finish(self, now: float, threads: dict, service: float) -> None:
        started, threads_then, service_then = self._start
        python_threads = {t.native_id for t in threading.enumerate()
                          if not isinstance(t, threading._DummyThread)}  # pylint: disable=protected-access
        per_group = dict.fromkeys(GROUPS, 0.0)
        for tid, (name, seconds) in threads.items():
            per_group[group_of(name, tid, python_threads)] += seconds - threads_then.get(tid, (name, 0.0))[1]
        micros = 1e6 / self._steps
        self.per_step = {"wall": (now - started) * micros, "host": (now - started - self._in_calls) * micros,
                         "trainer": sum(per_group.values()) * micros,
                         **{group: seconds * micros for group, seconds in per_group.items()},
                         "service": (service - service_then) * micros}


def measure_contender(name: str, path: str, rows: int, batch_size: int, warmup: int, steps: int,
                      src: str | None = None) -> dict[str, float]:
    """Trains contender `name` in this (fresh) process; returns its CPU per step, in microseconds, by group."""
    kind, est, src = elastic_input.import_contender(name, src)
    import deepfm

    args = argparse.Namespace(rows=rows, batch_size=batch_size)
    epochs = (warmup + steps + 10) * batch_size // rows + 2
    call_end = CallEnd()
    window = CpuWindow(warmup, steps, call_end)
    with tempfile.TemporaryDirectory() as tmp:
        # A plain SessionRunHook (no several_steps_per_call): one step per call, as elastic_input's turns run.
        with elastic_input.trainer(kind, path, tmp, args, epochs, src) as (input_fn, hooks):
            estimator = est.Estimator(deepfm.criteo_model_fn, model_dir=os.path.join(tmp, "model"),
                                      config=est.RunConfig(tf_random_seed=1))
            estimator.train(input_fn, hooks=[call_end, *hooks, window], steps=warmup + steps + 1)
    if not window.per_step:
        raise RuntimeError(f"{name} stopped before {warmup + steps} steps: its input ended early")
    return window.per_step


def measure_input(name: str, path: str, rows: int, batch_size: int, warmup: int, batches: int,
                  src: str | None = None) -> float:
    """Microseconds of this (fresh) process's CPU per batch of contender `name`'s input pipeline, on its own."""
    kind, _, src = elastic_input.import_contender(name, src)
    args = argparse.Namespace(rows=rows, batch_size=batch_size)
    epochs = (warmup + batches + 10) * batch_size // rows + 2
    with tempfile.TemporaryDirectory() as tmp:
        with elastic_input.trainer(kind, path, tmp, args, epochs, src, trains=False) as (input_fn, _):
            elements = iter(input_fn())
            for _ in range(warmup):
                next(elements)
            started = time.process_time()
            for _ in range(batches):
                next(elements)
            return (time.process_time() - started) / batches * 1e6


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    elastic_input.add_against_argument(parser, "measure")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    contenders = elastic_input.with_against(CONTENDERS, args.against)
    steps: dict[str, list[dict]] = {name: [] for name in contenders}
    inputs: dict[str, list[float]] = {name: [] for name in contenders}
    with elastic_input.data_and_worktree(args.rows, args.against) as (path, src):
        for order in shuffled_rounds(contenders, args.rounds):
            for name in order:
                steps[name].append(in_fresh_processes(measure_contender, name, path, args.rows, args.batch_size,
                                                      args.warmup, args.steps, src))
                inputs[name].append(in_fresh_processes(measure_input, name, path, args.rows, args.batch_size,
                                                       args.warmup, args.steps, src))
    columns = ("wall", "host", "trainer", *GROUPS, "service")
    figures = {name: {c: statistics.median(r[c] for r in rounds) for c in columns} for name, rounds in steps.items()}
    for name in contenders:
        figures[name]["input_alone"] = statistics.median(inputs[name])
    result = {"benchmark": "elastic_cpu", "rows": args.rows, "batch_size": args.batch_size,
              "warmup_steps": args.warmup, "steps": args.steps, "rounds": args.rounds,
              "median_micros_per_step": figures, "per_round": steps, "input_alone_per_round": inputs,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}"}
    shown = (*columns, "input_alone")
    plain = figures["file_reader"]
    rows = "".join(f"| {name} | " + " | ".join(f"{figures[name][c]:,.0f}" for c in shown) + " |\n"
                   for name in contenders)
    extra = "".join(f"| {name} | " + " | ".join(f"{figures[name][c] - plain[c]:+,.0f}" for c in shown) + " |\n"
                    for name in contenders[1:])
    header = "| contender | " + " | ".join(shown) + " |\n|" + "---|" * (1 + len(shown)) + "\n"
    markdown = (
        "# Elastic input's CPU, by thread\n\n"
        f"DeepFM-like model on a Criteo-shaped file ({args.rows} rows), batch {args.batch_size}, one step per "
        f"call. Each contender trains in a fresh process, {args.rounds} rounds in a shuffled order; CPU time "
        f"from /proc over {args.steps} steps after {args.warmup}, in microseconds per step (medians of the "
        "rounds). `wall` is the step's wall time, `host` the part of it outside the session call (the hooks, the "
        "report's send among them: the step's serial host path); `trainer` the training process's CPU, split into its threads' "
        "groups (see bench/elastic_cpu.py); `service` the remote shard service's process; `input_alone` the "
        f"CPU per batch of the input pipeline iterated on its own. Machine: {result['machine']}.\n\n"
        + header + rows + "\nOver the plain pipeline's:\n\n" + header + extra
    )
    write_results(args.out, "elastic_cpu", result, markdown)
    return result


if __name__ == "__main__":
    main()
