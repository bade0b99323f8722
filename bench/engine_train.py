"""Estimator.train steps/s against a plain tf.function loop, on the same model and data.

Run:  python bench/engine_train.py [--batch-size 512] [--steps 300] [--runs 3]

Both contenders train the DeepFM-like model of bench/deepfm.py with the same
optimizer on the same batches. Runs alternate (estimator, loop, estimator, ...)
so machine noise hits both; the first `--warmup` steps of each run are not
timed. Results go to bench/results/engine_train.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

import deepfm  # noqa: E402
from report import add_timed_run_arguments, write_results  # noqa: E402
from timing import WindowTimer  # noqa: E402
import elastimator as est  # noqa: E402





def estimator_run(batch_size: int, steps: int, warmup: int) -> float:
    with tempfile.TemporaryDirectory() as model_dir:
        estimator = est.Estimator(deepfm.make_model_fn(est), model_dir=model_dir,
                                  config=est.RunConfig(tf_random_seed=1))
        timer = WindowTimer(warmup)
        estimator.train(lambda: deepfm.dataset(batch_size), steps=steps, hooks=[timer])
        return timer.rate()


def function_loop_run(batch_size: int, steps: int, warmup: int) -> float:
    step = deepfm.make_train_step(deepfm.DeepFM(), deepfm.optimizer())
    start = None
    for i, (features, labels) in enumerate(deepfm.dataset(batch_size, steps)):
        step(features, labels).numpy()
        if i + 1 == warmup:
            start = time.perf_counter()
    return (steps - warmup) / (time.perf_counter() - start)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timed_run_arguments(parser)
    args = parser.parse_args(argv)

    rates: dict[str, list[float]] = {"estimator": [], "tf_function": []}
    for _ in range(args.runs):
        rates["estimator"].append(estimator_run(args.batch_size, args.steps, args.warmup))
        rates["tf_function"].append(function_loop_run(args.batch_size, args.steps, args.warmup))
    median = {name: statistics.median(values) for name, values in rates.items()}
    result = {
        "benchmark": "engine_train",
        "model": "DeepFM-like: 13 dense + 26 hashed categorical (10k buckets each), embedding 8, FM + MLP 64-32, "
                 "v1 Adam",
        "batch_size": args.batch_size,
        "timed_steps_per_run": args.steps - args.warmup,
        "runs": args.runs,
        "steps_per_sec": rates,
        "median_steps_per_sec": median,
        "ratio_estimator_over_tf_function": median["estimator"] / median["tf_function"],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "tensorflow": tf.__version__},
    }
    markdown = (
        f"# Estimator.train vs a tf.function loop\n\n{result['model']}, batch {args.batch_size}, "
        f"{args.runs} interleaved runs of {args.steps} steps ({args.warmup} warm-up steps not timed).\n"
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}.\n\n"
        "| contender | median steps/s | examples/s | runs (steps/s) |\n|---|---|---|---|\n"
        + "".join(f"| {name} | {median[name]:.1f} | {median[name] * args.batch_size:,.0f} | "
        f"{', '.join(f'{v:.1f}' for v in values)} |\n" for name, values in rates.items())
        + f"\n**Ratio estimator / tf.function: {result['ratio_estimator_over_tf_function']:.3f}**\n"
    )
    write_results(args.out, "engine_train", result, markdown)
    return result


if __name__ == "__main__":
    main()
