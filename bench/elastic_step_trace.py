"""Where elastic input's time goes inside a training step: the Python calls it adds, traced.

elastic_input.py measures what elastic input costs in examples/s; this shows where. Every elastic step runs
the `numpy_function` `shard_reports/settled`, the write gate: as the step takes its batch it waits for the
acknowledgement of the previous batch's report (sent as the previous call ended; up to f017306 the gate sent
it too) and checks the batch's lease, and every write of the step waits for it. A trainer with a report
ring (elastic/report_ring.py) has no report to wait for: its gate is graph ops on the batch's lease, ending in
the `Assert` `withdrawn_batch` that every gate has; up to 35ba663 a trainer with an ack file read it after the loss (`ack_file/ReadFile`)
and called the check only where the acknowledgement was not there. Versions up to 37c2581 ran two: `shard_reports/send` (the send, beside the
forward pass) and the gate after the loss, which only read the acknowledgement. `--against REV` traces
another version's code side by side, to see where a change moves them. Each contender below trains the
benchmark's DeepFM-like model from the same Criteo-shaped file in a process of its own, one step per call,
and traces `--traced` steps after `--warmup` (RunOptions FULL_TRACE step stats):
  file_reader      the plain FileReader pipeline
  elastic          the shard service in the training process (chief, local job)
  elastic_remote   the service in another process, reports and requests over its report line (workers)
With `--against REV`, elastic@REV and elastic_remote@REV run the code of git revision REV (a worktree).
The figures are the medians over every traced step of all rounds: each op's duration and where it starts in
the step, and the step's span. Tracing slows every step alike, so spans compare contenders here but are not
their training speed (elastic_input.py measures that).

`numpy_function floor`: what one trivial `numpy_function` (no work, one small input) adds to a session call
on this machine, outside any model: a graph run with and without it, interleaved, in one process.

Run:  python bench/elastic_step_trace.py [--rows 200000] [--warmup 150] [--traced 60] [--rounds 3] [--against REV]
Results go to bench/results/elastic_step_trace.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "criteo"))

import tensorflow as tf  # noqa: E402

import elastic_input  # noqa: E402
from report import RESULTS, write_results  # noqa: E402
from timing import in_fresh_processes, shuffled_rounds  # noqa: E402

CONTENDERS = ("file_reader", "elastic", "elastic_remote")
"""The contenders that also run another version's code with --against."""
OPS = ("shard_reports/send", "shard_reports/settled", "withdrawn_batch", "ack_file/ReadFile")
"""The elastic step's Python calls, the `Assert` every write of a gated step waits for (`withdrawn_batch`: a
report ring's gate, graph ops alone, has no other node left once the graph is optimized), and the read of a
trainer's ack file (up to 35ba663), by node name (the end of it: the Python check of a gate with an ack file runs
in a branch, and takes its name)."""


class StepTrace(tf.compat.v1.train.SessionRunHook):
    """Traces the calls after the first `warmup` ones and keeps, per traced call, its span and the start and
    duration of each op in `OPS` (microseconds, from the call's first op); stops training after `traced`."""

    def __init__(self, warmup: int, traced: int):
        self._warmup, self._traced, self._calls = warmup, traced, 0
        self.steps: list[dict[str, float]] = []

    def before_run(self, run_context):
        self._calls += 1
        if self._calls > self._warmup:
            return tf.compat.v1.train.SessionRunArgs(None, options=tf.compat.v1.RunOptions(
                trace_level=tf.compat.v1.RunOptions.FULL_TRACE))
        return None

    def after_run(self, run_context, run_values):
        if self._calls <= self._warmup:
            return
        nodes = [n for device in run_values.run_metadata.step_stats.dev_stats for n in device.node_stats]
        first = min(n.all_start_micros for n in nodes)
        step = {"span": max(n.all_start_micros + n.all_end_rel_micros for n in nodes) - first}
        for n in nodes:
            op = next((op for op in OPS if n.node_name == op or n.node_name.endswith("/" + op)), None)
            if op is not None:
                step[f"{op} start"] = n.all_start_micros - first
                step[f"{op} duration"] = n.all_end_rel_micros
        self.steps.append(step)
        if len(self.steps) >= self._traced:
            run_context.request_stop()


def trace_contender(name: str, path: str, rows: int, batch_size: int, warmup: int, traced: int,
                    src: str | None = None) -> list[dict]:
    """Trains the input of contender `name` in this (fresh) process; returns its traced steps. A name KIND@REV
    trains, and runs its remote service, with the source tree `src` (a worktree of REV)."""
    kind, est, src = elastic_input.import_contender(name, src)
    import deepfm

    args = argparse.Namespace(rows=rows, batch_size=batch_size)
    epochs = (warmup + traced + 10) * batch_size // rows + 2
    trace = StepTrace(warmup, traced)
    with tempfile.TemporaryDirectory() as tmp:
        # A plain SessionRunHook (no several_steps_per_call): one step per call, as elastic_input's turns run.
        with elastic_input.trainer(kind, path, tmp, args, epochs, src) as (input_fn, hooks):
            estimator = est.Estimator(deepfm.criteo_model_fn, model_dir=os.path.join(tmp, "model"),
                                      config=est.RunConfig(tf_random_seed=1))
            estimator.train(input_fn, hooks=[*hooks, trace], steps=warmup + traced)
    if len(trace.steps) < traced:
        raise RuntimeError(f"{name} traced {len(trace.steps)} steps of {traced}: its input ended early")
    return trace.steps


def numpy_function_floor(calls: int, rounds: int) -> dict[str, float]:
    """Microseconds per session call of a tiny graph without and with one trivial numpy_function it waits for,
    interleaved over `rounds`; medians."""
    import numpy as np

    tf.compat.v1.disable_eager_execution()
    given = tf.compat.v1.placeholder_with_default(tf.zeros([4], tf.int64), [4])
    plain = tf.identity(given)
    checked = tf.numpy_function(lambda tags: np.bool_(True), [given], tf.bool, stateful=True)
    with tf.control_dependencies([checked]):
        gated = tf.identity(given)
    timings: dict[str, list[float]] = {"without": [], "with": []}
    with tf.compat.v1.Session() as session:
        for _ in range(rounds):
            for name, fetch in (("without", plain), ("with", gated)):
                for _ in range(calls // 10):
                    session.run(fetch)
                start = time.perf_counter()
                for _ in range(calls):
                    session.run(fetch)
                timings[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(values) for name, values in timings.items()}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--warmup", type=int, default=150)
    parser.add_argument("--traced", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor-calls", type=int, default=3000)
    elastic_input.add_against_argument(parser, "trace")
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    contenders = elastic_input.with_against(CONTENDERS, args.against)
    steps: dict[str, list[dict]] = {name: [] for name in contenders}
    with elastic_input.data_and_worktree(args.rows, args.against) as (path, src):
        for order in shuffled_rounds(contenders, args.rounds):
            for name in order:
                steps[name] += in_fresh_processes(trace_contender, name, path, args.rows, args.batch_size,
                                                  args.warmup, args.traced, src)
        floor = in_fresh_processes(numpy_function_floor, args.floor_calls, args.rounds)
    figures = {name: {key: statistics.median(step[key] for step in name_steps if key in step)
                      for key in sorted({key for step in name_steps for key in step})}
               for name, name_steps in steps.items()}
    result = {"benchmark": "elastic_step_trace", "rows": args.rows, "batch_size": args.batch_size,
              "warmup_steps": args.warmup, "traced_steps_per_round": args.traced, "rounds": args.rounds,
              "median_micros": figures, "numpy_function_floor_micros": floor, "steps": steps,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}"}
    columns = ["span", *(f"{op} {what}" for op in OPS for what in ("start", "duration"))]
    rows = "".join(f"| {name} | " + " | ".join(f"{figures[name][c]:,.0f}" if c in figures[name] else "-"
                                                for c in columns) + " |\n" for name in contenders)
    markdown = (
        "# Elastic input inside a step\n\n"
        f"DeepFM-like model on a Criteo-shaped file ({args.rows} rows), batch {args.batch_size}, one step per "
        f"call. Each contender trains in a fresh process, {args.rounds} rounds in a shuffled order; "
        f"{args.traced} steps traced per round (FULL_TRACE) after {args.warmup}. Medians over all traced steps, "
        "in microseconds from the step's first op. Tracing slows every step, so spans compare contenders "
        f"here but are not training speed (see elastic_input.md). Machine: {result['machine']}.\n\n"
        "| contender | " + " | ".join(columns) + " |\n|" + "---|" * (1 + len(columns)) + "\n" + rows
        + "\nSpan over the plain pipeline's: " + "; ".join(
            f"{name} {figures[name]['span'] - figures['file_reader']['span']:+,.0f} µs" for name in contenders[1:])
        + ".\n\n`shard_reports/settled` is the write gate's check, and every write of the step waits for it. It "
        "waits for the reply to the report the previous call sent as it ended, as the step takes its batch, "
        "beside the forward pass (up to f017306 it sent the report itself first); in versions up to 37c2581 it "
        "starts after the loss and only reads the reply of the report that `shard_reports/send` sent beside "
        "the forward pass. A trainer on the service's machine writes its reports into its report ring, and its gate "
        "is graph ops on the batch's lease (the `Assert` `withdrawn_batch`, which every gate has, their last); up to 35ba663 it read an ack file "
        "after the loss (`ack_file/ReadFile`) and called the check only where the acknowledgement was not there: "
        "its figure for the check is the median of those steps alone.\n\n"
        f"**numpy_function floor**: a session call of a tiny graph took {floor['without']:,.0f} µs, and "
        f"{floor['with']:,.0f} µs with one trivial `numpy_function` it waits for: "
        f"{floor['with'] - floor['without']:,.0f} µs per Python call from a step, before any work of its own.\n"
    )
    write_results(args.out, "elastic_step_trace", result, markdown)
    return result


if __name__ == "__main__":
    main()
