"""Where one training step's time goes: kernels, the executor between them, and the call around it.

Run:  python bench/step_profile.py [--steps 400] [--traced 20]

Trains the DeepFM-like model of deepfm.py (batch 512) one step per session call,
as a program with its own per-step hook does, with default settings (summaries
and step counts every 100 steps; a checkpoint only at the end), under elastimator and under
tf.estimator 2.15 (each in its own process; 2.15 from bench/.venv-tf215, see
frameworks.py). For each it reports, as medians over steps:

- the wall time of a call, between one after_run and the next (untraced steps),
  and of the same step run through a bare `Session.make_callable` afterwards;
- the executor's span in traced steps (RunOptions FULL_TRACE, as ProfilerHook
  asks for it): first kernel start to last kernel end;
- the time at least one kernel runs within that span, and the kernels' summed
  time per op type;
- the step's floating-point work: TensorFlow's profiler count (ops with
  registered statistics: matmuls, element-wise math) plus the fused Adam kernel,
  which has none, at 12 operations per element it updates;
- the machine's FLOP/s (a 2048x2048 float32 matmul on all cores) and its memory
  bandwidth (a fused multiply-add over 64 MB arrays), measured in the same process.

Results go to bench/results/step_profile.{json,md}.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from report import RESULTS, write_results  # noqa: E402

ADAM_FLOPS_PER_ELEMENT = 12
"""m += (g - m)(1 - b1): 3; v += (g^2 - v)(1 - b2): 4; var -= lr_t m / (sqrt(v) + eps): 5."""


def _union_micros(intervals: list[tuple[int, int]]) -> int:
    """How long at least one of the (start, end) intervals is open."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def _machine_rates(tf) -> dict:
    """Matmul FLOP/s and element-wise add bytes/s of this process's CPU, all cores."""
    n, elements = 2048, 16 * 2**20
    a = tf.random.stateless_uniform([n, n], seed=[1, 2])
    x, y = (tf.random.stateless_uniform([elements], seed=[3, s]) for s in (4, 5))
    matmul = tf.function(lambda: tf.linalg.matmul(a, a)[-1, -1])
    add = tf.function(lambda: tf.math.add(x, y)[-1])  # reads x and y, writes their sum: 3 x 64 MB

    def best_of(fn, repeats: int) -> float:
        fn().numpy()
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            fn().numpy()
            times.append(time.perf_counter() - started)
        return min(times)

    return {"matmul_flops_per_sec": 2 * n**3 / best_of(matmul, 10),
            "add_bytes_per_sec": 3 * 4 * elements / best_of(add, 10)}


def profile(framework: str, steps: int, traced: int) -> dict:
    """One framework's step profile, in this process."""
    import tensorflow as tf

    import deepfm

    est = tf.estimator if framework == "tf_estimator" else __import__("elastimator")
    every = max(steps // (traced + 1), 2)
    trace_at = {every * (i + 1) for i in range(traced)}

    class StepProfile(tf.compat.v1.train.SessionRunHook):
        """A program's own per-step hook: it times each call and traces some, as ProfilerHook would."""

        def begin(self):
            self.calls, self.walls, self.metadata, self.last = 0, [], [], None
            self.graph = tf.compat.v1.get_default_graph()
            self.adam_elements = sum(v.shape.num_elements() for v in tf.compat.v1.trainable_variables())

        def before_run(self, run_context):
            self.calls += 1
            if self.calls in trace_at:
                return tf.compat.v1.train.SessionRunArgs(None, options=tf.compat.v1.RunOptions(
                    trace_level=tf.compat.v1.RunOptions.FULL_TRACE))
            return None

        def after_run(self, run_context, run_values):
            now = time.perf_counter()
            if self.calls in trace_at:
                metadata = tf.compat.v1.RunMetadata()
                metadata.CopyFrom(run_values.run_metadata)
                self.metadata.append(metadata)
            elif self.last is not None and self.calls - 1 not in trace_at and self.calls > 20:
                self.walls.append(now - self.last)
            self.last = now

        def end(self, session):
            # The same step through a bare callable: no hooks, no MonitoredSession, nothing fetched.
            step = session.make_callable(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)[0])
            self.bare = []
            for _ in range(100):
                started = time.perf_counter()
                step()
                self.bare.append(time.perf_counter() - started)

    hook = StepProfile()
    with tempfile.TemporaryDirectory() as model_dir:
        estimator = est.Estimator(deepfm.make_model_fn(est), model_dir=model_dir,
                                  # default settings, but no checkpoint until the end
                                  config=est.RunConfig(tf_random_seed=1, save_checkpoints_steps=steps * 2))
        estimator.train(lambda: deepfm.dataset(512), steps=steps, hooks=[hook])

    spans, busy, kernels = [], [], collections.Counter()
    for metadata in hook.metadata:
        nodes = [n for device in metadata.step_stats.dev_stats for n in device.node_stats
                 if n.node_name != "_SOURCE"]
        intervals = [(n.all_start_micros, n.all_start_micros + n.all_end_rel_micros) for n in nodes]
        spans.append(max(end for _, end in intervals) - min(start for start, _ in intervals))
        busy.append(_union_micros(intervals))
        for node in nodes:
            label = node.timeline_label
            kind = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else node.node_name
            kernels[kind.removeprefix("_MklNative").removeprefix("_Mkl")] += node.all_end_rel_micros
    # The model's float ops as the profiler counts them, optimizer scopes left out (v1 Adam's element-wise ops
    # under tf.estimator; the fused kernel has no count): Adam is counted for both from its elements.
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = builder(builder.float_operation()).with_node_names(hide_name_regexes=[".*Adam.*"]) \
        .with_empty_output().build()
    counted = tf.compat.v1.profiler.profile(hook.graph, run_meta=hook.metadata[-1], cmd="scope",
                                            options=options).total_float_ops
    wall = statistics.median(hook.walls)
    flops = counted + ADAM_FLOPS_PER_ELEMENT * hook.adam_elements
    return {
        "framework": framework, "tensorflow": tf.__version__, "untimed_calls": len(hook.walls),
        "traced_steps": len(hook.metadata),
        "call_wall_ms": wall * 1e3, "bare_call_ms": statistics.median(hook.bare[10:]) * 1e3,
        "executor_span_ms": statistics.median(spans) / 1e3,
        "kernel_running_ms": statistics.median(busy) / 1e3,
        "kernel_sum_ms": sum(kernels.values()) / len(hook.metadata) / 1e3,
        "kernels_ms_by_op": {k: v / len(hook.metadata) / 1e3 for k, v in kernels.most_common(12)},
        "adam_kernel_ms": kernels["ResourceApplyAdam"] / len(hook.metadata) / 1e3,
        "profiler_float_ops": counted, "adam_elements": hook.adam_elements, "step_float_ops": flops,
        **_machine_rates(tf),
    }


def _derived(p: dict) -> dict:
    """The split of a call and the machine fractions."""
    return {
        "outside_executor_ms": p["call_wall_ms"] - p["executor_span_ms"],
        "hooks_and_session_ms": p["call_wall_ms"] - p["bare_call_ms"],
        "executor_gaps_ms": p["executor_span_ms"] - p["kernel_running_ms"],
        "kernel_share_of_call": p["kernel_running_ms"] / p["call_wall_ms"],
        "flops_fraction_of_matmul_peak": p["step_float_ops"] / (p["call_wall_ms"] / 1e3)
        / p["matmul_flops_per_sec"],
        # The fused kernel reads variable, both moments and the gradient and writes the first three: 7 x 4 bytes
        # per element, in the kernel time one thread would have taken (summed over threads). Only elastimator
        # runs it on every table.
        "adam_bytes_per_sec": 28 * p["adam_elements"] / (p["adam_kernel_ms"] / 1e3)
        if p["framework"] == "elastimator" else None,
    }


def _markdown(result: dict) -> str:
    profiles = result["profiles"]
    names = list(profiles)
    rows = [
        ("call wall time (untraced), ms", "call_wall_ms", "{:.2f}"),
        ("the step through a bare callable, ms", "bare_call_ms", "{:.2f}"),
        ("hooks and MonitoredSession (call - bare), ms", "hooks_and_session_ms", "{:.2f}"),
        ("executor span (traced), ms", "executor_span_ms", "{:.2f}"),
        ("some kernel running, ms", "kernel_running_ms", "{:.2f}"),
        ("outside the executor (session call, hooks), at least, ms", "outside_executor_ms", "{:.2f}"),
        ("gaps between kernels, ms", "executor_gaps_ms", "{:.2f}"),
        ("kernels summed over threads, ms", "kernel_sum_ms", "{:.2f}"),
        ("kernel running / call", "kernel_share_of_call", "{:.0%}"),
        ("model float ops (profiler, optimizer left out), M", "profiler_float_ops", "{:.1f}"),
        ("step float ops (model + Adam), M", "step_float_ops", "{:.1f}"),
        ("machine matmul peak, GFLOP/s", "matmul_flops_per_sec", "{:.1f}"),
        ("step FLOP/s / matmul peak", "flops_fraction_of_matmul_peak", "{:.2%}"),
        ("Adam kernel's memory traffic, GB/s", "adam_bytes_per_sec", "{:.1f}"),
        ("machine element-wise add, GB/s", "add_bytes_per_sec", "{:.1f}"),
    ]
    scale = {"step_float_ops": 1e-6, "profiler_float_ops": 1e-6, "matmul_flops_per_sec": 1e-9, "add_bytes_per_sec": 1e-9,
             "adam_bytes_per_sec": 1e-9}
    table = "| | " + " | ".join(f"{n} (TF {profiles[n]['tensorflow']})" for n in names) + " |\n|---|" \
        + "---|" * len(names) + "\n"
    for label, key, fmt in rows:
        table += f"| {label} | " + " | ".join("-" if profiles[n][key] is None else
                                             fmt.format(profiles[n][key] * scale.get(key, 1)) for n in names) + " |\n"
    kernels = ""
    for name in names:
        kernels += f"\n**{name}**, kernel time per step by op type (ms, summed over threads):\n\n| op | ms |\n" \
                   "|---|---|\n" + "".join(f"| {op} | {ms:.3f} |\n"
                                           for op, ms in profiles[name]["kernels_ms_by_op"].items())
    return (
        "# One training step, profiled\n\n"
        f"DeepFM-like model of deepfm.py, batch 512, one step per session call (a per-step hook of the program's "
        f"own), {result['steps']} steps with {result['traced']} traced (RunOptions FULL_TRACE); medians. "
        f"Machine: {result['machine']}.\n\n"
        "A call's wall time = outside the executor (Python hooks, Session.run, executor set-up) + gaps between "
        "kernels inside the executor + time at least one kernel runs. Tracing slows the traced steps' executor, "
        "so their span taken from the untraced calls' wall time is the least the call costs outside it. "
        "The Adam kernel's traffic is shown where the fused kernel updates every table (elastimator; "
        "tf.estimator 2.15 runs it on the dense layers only). Float ops: TensorFlow's profiler count for the "
        f"model (its optimizer scopes left out), plus Adam at {ADAM_FLOPS_PER_ELEMENT} per variable element "
        "for both (the fused kernel has no registered count); every step updates every element, as v1 Adam's "
        "dense moment decay does.\n\n"
        + table + kernels)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--traced", type=int, default=20)
    parser.add_argument("--tf215-python", help="Python of an existing TF 2.15 + tensorflow-estimator environment")
    parser.add_argument("--skip-tf-estimator", action="store_true")
    parser.add_argument("--framework", choices=("elastimator", "tf_estimator"), help=argparse.SUPPRESS)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    if args.framework:  # a child process: one framework, printed as JSON
        print("RESULT " + json.dumps(profile(args.framework, args.steps, args.traced)), flush=True)
        return {}
    from frameworks import tf215_python  # pylint: disable=import-outside-toplevel

    pythons = {"elastimator": sys.executable}
    if not args.skip_tf_estimator:
        pythons["tf_estimator"] = tf215_python(args.tf215_python)
    profiles = {}
    for name, python in pythons.items():
        out = subprocess.run([python, os.path.abspath(__file__), "--framework", name, "--steps", str(args.steps),
                              "--traced", str(args.traced)], capture_output=True, text=True, timeout=1800,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if out.returncode != 0 or line is None:
            raise RuntimeError(f"{name} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
        measured = json.loads(line[len("RESULT "):])
        profiles[name] = {**measured, **_derived(measured)}
    import platform  # pylint: disable=import-outside-toplevel

    result = {"benchmark": "step_profile", "steps": args.steps, "traced": args.traced,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}",
              "profiles": profiles}
    write_results(args.out, "step_profile", result, _markdown(result))
    return result


if __name__ == "__main__":
    main()
