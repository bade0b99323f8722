"""After how many steps does a `train` call's loop of several steps per session call pay for its building?

Run:  python bench/loop_break_even.py [--steps 25,50,100,200,400] [--rounds 5]

Several steps per session call (elastimator.estimator.step.multi_step) save the call around each step but cost
graph-building time before the first step: the step is copied into a loop, and the first call optimizes the
bigger graph. Automatic sizing (steps_per_call.py) therefore runs one step per call for a `train` call of fewer
than FEW_STEPS steps. This measures where the break-even lies: whole `train(steps=N)` calls (graph, session,
restore, N steps, the final checkpoint) with up to 20 steps per call (`loop`: RunConfig(steps_per_execution=20))
and with one (`one`: steps_per_execution=1), alternating in one process per model, each variant continuing
its own model_dir, for the DeepFM of deepfm.py (batch 512) and a linear model over its features (batch 64).

Results go to bench/results/loop_break_even.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

import deepfm  # noqa: E402
import eval_batches_per_call  # noqa: E402  (its linear model)
import report  # noqa: E402
import timing  # noqa: E402

VARIANTS = {"loop": 20, "one": 1}


def measure(model: str, steps: list[int], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Seconds of `train(steps=N)` calls per variant and N."""
    import elastimator as est

    make_model_fn, batch_size = eval_batches_per_call.MODELS[model]
    estimators = {name: est.Estimator(make_model_fn(est), model_dir=tempfile.mkdtemp(), config=est.RunConfig(
        tf_random_seed=1, steps_per_execution=per_call, log_step_count_steps=None)) for name, per_call in VARIANTS.items()}
    for estimator in estimators.values():  # a checkpoint to resume from, as every later call does
        estimator.train(lambda: deepfm.dataset(batch_size), steps=1)
    secs = {name: {str(n): [] for n in steps} for name in estimators}
    for order in timing.shuffled_rounds([(name, n) for name in estimators for n in steps], rounds):
        for name, n in order:
            started = time.perf_counter()
            estimators[name].train(lambda: deepfm.dataset(batch_size), steps=n)
            secs[name][str(n)].append(time.perf_counter() - started)
    return secs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="25,50,100,200,400")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=report.RESULTS)
    args = parser.parse_args()
    steps = [int(n) for n in args.steps.split(",")]
    results = {}
    for model in eval_batches_per_call.MODELS:
        secs = timing.in_fresh_processes(measure, model, steps, args.rounds)
        medians = {name: {n: statistics.median(values) for n, values in by_steps.items()} for name, by_steps in secs.items()}
        results[model] = {"secs": {name: {n: round(v, 4) for n, v in by.items()} for name, by in medians.items()},
                          "one_over_loop": {n: round(medians["one"][n] / medians["loop"][n], 3) for n in medians["one"]}}
    rows = "".join(
        f"| {model} | {n} | {r['secs']['loop'][n]:.3f} | {r['secs']['one'][n]:.3f} | {r['one_over_loop'][n]:.2f}x |\n"
        for model, r in results.items() for n in r["secs"]["loop"])
    markdown = (
        "# When a train call's loop pays for itself\n\n"
        f"Whole `train(steps=N)` calls, seconds, median of {args.rounds} interleaved rounds in one process per model: "
        "up to 20 steps per session call (`loop`) against one (`one`). Above 1.00x the loop pays.\n\n"
        "| model | N | loop | one | loop speed-up |\n|---|---|---|---|---|\n" + rows)
    report.write_results(args.out, "loop_break_even", {"rounds": args.rounds, "results": results}, markdown)


if __name__ == "__main__":
    main()
