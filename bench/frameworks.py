"""elastimator vs tf.estimator 2.15 vs Keras 3 model.fit vs a tf.function loop, side by side.

Run:  python bench/frameworks.py [--steps 300] [--runs 3] [--against REV] [--hog N]

Each contender runs in its own process (bench/contenders.py), so peak memory is
its own; runs are interleaved (a, b, c, d, a, b, ...) and medians reported.
tf.estimator 2.15 runs in a virtualenv this script creates once at
bench/.venv-tf215 (tensorflow-cpu==2.15.1, tensorflow-estimator==2.15.0).
Results go to bench/results/frameworks.{json,md}.

`--against REV` adds `elastimator_before`: the default elastimator contender
run with the code of git revision REV (a temporary worktree's src first on
the path), interleaved with the others, and the ratios of elastimator's
figures over it: a change measured side by side against the code before it.
`--hog N` runs N processes that each keep a core busy beside every contender
(the figures of a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from contenders import AGAIN_STEPS  # noqa: E402
from report import add_timed_run_arguments, cpu_hog, worktree  # noqa: E402
TF215_VENV = os.path.join(HERE, ".venv-tf215")
TF215_PACKAGES = ["tensorflow-cpu==2.15.1", "tensorflow-estimator==2.15.0", "pandas==2.1.4", "scikit-learn==1.5.2"]
"""The TF 2.15 environment: pandas for the pandas_input_fn program, scikit-learn for EasyRec's (its main imports it)."""
METRICS = ("train_examples_per_sec", "eval_examples_per_sec", "predict_examples_per_sec",
           "eval_again_examples_per_sec", "predict_again_examples_per_sec", "predict_single_again_examples_per_sec",
           "warm_predict_examples_per_sec", "time_to_first_step_secs", "train_again_secs", "train_on_secs",
           "checkpoint_save_secs", "export_secs", "peak_rss_mb", "rss_after_import_mb", "own_peak_rss_mb", "peak_rss_with_warm_predictor_mb")
CONTENDERS = ("elastimator", "elastimator_unfused", "elastimator_one_step", "elastimator_own_hook",
              "elastimator_mirrored", "tf_estimator", "keras_fit", "tf_function", "elastimator_before")
TARGETS = {  # (numerator, denominator, metric, at least): issue 18's targets, default settings
    "elastimator / tf_estimator train": ("elastimator", "tf_estimator", "train_examples_per_sec", 2.0),
    "elastimator / keras_fit train": ("elastimator", "keras_fit", "train_examples_per_sec", 1.5),
    "elastimator / tf_function train": ("elastimator", "tf_function", "train_examples_per_sec", 1.5),
    "elastimator warm Predictor / tf_estimator predict": ("elastimator", "tf_estimator",
                                                          ("warm_predict_examples_per_sec", "predict_examples_per_sec"),
                                                          2.0),
    # Issue 61: whole calls of evaluate and predict, the first of the process and a second one after more
    # training (elastimator keeps the graph: estimator/loops/warm_graphs.py; Keras keeps its traced functions).
    "elastimator / tf_estimator evaluate (first call)": ("elastimator", "tf_estimator", "eval_examples_per_sec", 1.5),
    "elastimator / keras_fit evaluate (first call)": ("elastimator", "keras_fit", "eval_examples_per_sec", 1.0),
    "elastimator / tf_estimator evaluate (second call)": ("elastimator", "tf_estimator", "eval_again_examples_per_sec",
                                                          1.5),
    "elastimator / keras_fit evaluate (second call)": ("elastimator", "keras_fit", "eval_again_examples_per_sec", 1.0),
    "elastimator / tf_estimator predict (first call)": ("elastimator", "tf_estimator", "predict_examples_per_sec",
                                                        1.5),
    "elastimator / keras_fit predict (first call)": ("elastimator", "keras_fit", "predict_examples_per_sec", 1.0),
    "elastimator / tf_estimator predict (second call)": ("elastimator", "tf_estimator",
                                                         "predict_again_examples_per_sec", 1.5),
    "elastimator / keras_fit predict (second call)": ("elastimator", "keras_fit", "predict_again_examples_per_sec",
                                                      1.0),
    "elastimator / tf_estimator predict one example at a time (second call)": (
        "elastimator", "tf_estimator", "predict_single_again_examples_per_sec", 1.5),
    "elastimator per example / per batch (second predict call)": (
        "elastimator", "elastimator", ("predict_single_again_examples_per_sec", "predict_again_examples_per_sec"),
        None),

    "elastimator_unfused / tf_estimator train": ("elastimator_unfused", "tf_estimator", "train_examples_per_sec", None),
    "elastimator_one_step / tf_estimator train": ("elastimator_one_step", "tf_estimator", "train_examples_per_sec",
                                                  None),
    "elastimator / elastimator_one_step train": ("elastimator", "elastimator_one_step", "train_examples_per_sec",
                                                 None),
    # Issue 51: one step per call, forced by the program's own per-step hook, both timed by that hook.
    "elastimator_own_hook / tf_estimator train": ("elastimator_own_hook", "tf_estimator", "train_examples_per_sec",
                                                  2.0),
    # Issue 46: a one-replica strategy costs nothing (within 5% of plain training).
    "elastimator_mirrored / elastimator train": ("elastimator_mirrored", "elastimator", "train_examples_per_sec",
                                                 0.95),
}


def tf215_python(explicit: str | None) -> str:
    """The Python of a TF 2.15 + tensorflow-estimator environment, created on first use."""
    if explicit:
        return explicit
    python = os.path.join(TF215_VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", TF215_VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", *TF215_PACKAGES], check=True)
    return python


def gpus_seen(python: str) -> int:
    """How many GPUs the TensorFlow of `python` sees."""
    probe = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=900,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    lines = out.stdout.split()
    return int(lines[-1]) if out.returncode == 0 and lines else 0


def check_device(device: str, pythons: dict[str, str]) -> None:
    """Refuses a GPU run where a contender's TensorFlow sees no GPU: nothing would be measured on one."""
    if device != "gpu":
        return
    for python in sorted(set(pythons.values())):
        if gpus_seen(python) == 0:
            users = ", ".join(name for name, p in pythons.items() if p == python)
            raise SystemExit(
                f"--device gpu: the TensorFlow of {python} (contenders {users}) sees no GPU "
                "(tf.config.list_physical_devices('GPU') is empty), so nothing was run. Run on a machine with a CUDA "
                "GPU and TensorFlow's GPU build (pip install 'tensorflow[and-cuda]'; for tf.estimator 2.15, "
                "--tf215-python of a tensorflow==2.15.1 environment that sees it), or leave out --device gpu to "
                "measure on the CPU.")


def run_contender(python: str, name: str, args, src: str | None = None) -> dict:
    """One run of contender `name` in a process of its own (with `src` first on its path: another version's code)."""
    command = [python, os.path.join(HERE, "contenders.py"), name, "--batch-size", str(args.batch_size),
               "--steps", str(args.steps), "--warmup", str(args.warmup), "--eval-batches", str(args.eval_batches)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a machine's GPU, if it has one, stays out of a CPU run
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"contender {name} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


MEMORY = {  # (numerator, denominator, metric, at most): memory, time to the first step, a second train call
    # Issue 51: what the framework holds beyond `import tensorflow` (TF 2.21 imports Keras 3 and more than 2.15).
    "elastimator / tf_estimator peak RSS beyond import": ("elastimator", "tf_estimator", "own_peak_rss_mb", 1.0),
    "elastimator_own_hook / tf_estimator peak RSS beyond import": ("elastimator_own_hook", "tf_estimator",
                                                                   "own_peak_rss_mb", 1.0),
    "elastimator / tf_estimator peak RSS (whole process)": ("elastimator", "tf_estimator", "peak_rss_mb", None),
    # Issue 61: the first step comes no later than tf.estimator's.
    "elastimator / tf_estimator time to the first step": ("elastimator", "tf_estimator", "time_to_first_step_secs",
                                                          1.0),
    # Issue 61: a second train call after an evaluation and a prediction keeps elastimator's graph (a session is
    # opened on it again: the evaluation closed the training's); one right after a train call keeps its session
    # too. tf.estimator built both afresh; Keras and the tf.function loop keep their traced functions.
    "elastimator / tf_estimator second train call": ("elastimator", "tf_estimator", "train_again_secs", None),
    "elastimator / keras_fit second train call": ("elastimator", "keras_fit", "train_again_secs", None),
    "elastimator / tf_estimator train call right after one": ("elastimator", "tf_estimator", "train_on_secs", None),
    "elastimator / keras_fit train call right after one": ("elastimator", "keras_fit", "train_on_secs", None),
}
BEFORE = {  # --against REV: the default contender over itself with REV's code (secs and MB: below 1 is better)
    f"elastimator / elastimator_before {metric}": ("elastimator", "elastimator_before", metric, None)
    for metric in ("train_examples_per_sec", "eval_examples_per_sec", "predict_examples_per_sec",
                   "eval_again_examples_per_sec", "predict_again_examples_per_sec", "time_to_first_step_secs",
                   "train_again_secs", "own_peak_rss_mb")
}


def _ratio(runs: dict, medians: dict, num: str, den: str, metrics: tuple[str, str]) -> tuple[float, float, float]:
    """The ratio of the medians, and the least and greatest ratio within one round (a's run i over b's run i)."""
    rounds = [a[metrics[0]] / b[metrics[1]] for a, b in zip(runs[num], runs[den])]
    return medians[num][metrics[0]] / medians[den][metrics[1]], min(rounds), max(rounds)


def summarize(runs: dict[str, list[dict]]) -> dict:
    medians = {name: {m: statistics.median(r[m] for r in results) for m in METRICS if m in results[0]}
               for name, results in runs.items() if results}
    ratios = {}
    for table, at_least in ((TARGETS, True), (MEMORY, False), (BEFORE, True)):
        for label, (num, den, metric, target) in table.items():
            metrics = metric if isinstance(metric, tuple) else (metric, metric)
            if num not in medians or den not in medians:
                continue
            value, low, high = _ratio(runs, medians, num, den, metrics)
            met = "-" if target is None else (value >= target if at_least else value <= target)
            shown = "-" if target is None else (target if at_least else f"<= {target}")
            ratios[label] = {"ratio": value, "round_min": low, "round_max": high, "target": shown, "met": met}
    return {"medians": medians, "ratios": ratios}


def _cell(medians: dict, metric: str) -> str:
    if metric not in medians:
        return "-"
    return f"{medians[metric]:,.3g}" if metric.endswith("secs") else f"{medians[metric]:,.0f}"


def write(result: dict, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "frameworks.json"), "w") as f:
        json.dump(result, f, indent=2)
    medians = result["medians"]
    header = "| contender | TF | " + " | ".join(METRICS) + " |\n|" + "---|" * (len(METRICS) + 2) + "\n"
    rows = "".join(f"| {name} | {result['versions'][name]} | "
                   + " | ".join(_cell(m, k) for k in METRICS) + " |\n"
                   for name, m in medians.items())
    met = {True: "yes", False: "no", "-": "-"}
    ratio_rows = "".join(f"| {label} | {r['ratio']:.3f} | {r['round_min']:.3f} .. {r['round_max']:.3f} | "
                         f"{r['target']} | {met[r['met']]} |\n" for label, r in result["ratios"].items())
    with open(os.path.join(out, "frameworks.md"), "w") as f:
        f.write(
            f"# Frameworks side by side\n\n{result['model']}; batch {result['batch_size']}, {result['steps']} "
            f"train steps ({result['warmup']} warm-up steps not timed), {result['eval_batches']} eval and predict "
            f"batches per call (the `again` columns: a second call after {AGAIN_STEPS} more training steps, each "
            f"given its input_fn anew; train_again_secs: that whole second train call; train_on_secs: one more "
            f"train call of {AGAIN_STEPS} steps right after it), on the "
            f"{result.get('device', 'cpu').upper()}; median of {result['runs']} interleaved runs, each contender in "
            "its own process, "
            "which imports TensorFlow first (own_peak_rss_mb: peak RSS minus the RSS right after that import; "
            "an estimator's peak is taken after its second calls, before elastimator's warm Predictor, whose "
            "process peak is peak_rss_with_warm_predictor_mb).\n"
            f"Machine: {result['machine']}"
            + (f"; {result['hog']} processes kept cores busy beside every run" if result.get("hog") else "")
            + ".\n\n" + header + rows
            + "\nA ratio is of the medians; the range is the least and greatest ratio within one round.\n\n"
            + "| ratio | value | range over rounds | target | met |\n|---|---|---|---|---|\n" + ratio_rows
        )


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timed_run_arguments(parser)
    parser.add_argument("--eval-batches", type=int, default=50)
    parser.add_argument("--tf215-python", help="Python of an existing TF 2.15 + tensorflow-estimator environment")
    parser.add_argument("--skip-tf-estimator", action="store_true", help="leave out tf.estimator 2.15")
    parser.add_argument("--only", nargs="+", choices=CONTENDERS, help="run these contenders only")
    parser.add_argument("--against", metavar="REV", help="add elastimator_before: the default contender with the "
                        "code of git revision REV (see the module doc)")
    parser.add_argument("--hog", type=int, default=0, metavar="N",
                        help="keep N cores busy with spinning processes while every contender runs")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="where the models run: cpu (GPUs hidden) or gpu (refused where TensorFlow sees none)")
    args = parser.parse_args(argv)
    pythons = {name: sys.executable for name in CONTENDERS if name not in ("tf_estimator", "elastimator_before")}
    if args.against:
        pythons["elastimator_before"] = sys.executable
    if not args.skip_tf_estimator:
        pythons["tf_estimator"] = tf215_python(args.tf215_python)
    order = [n for n in CONTENDERS if n in pythons and (not args.only or n in args.only)]
    check_device(args.device, {name: pythons[name] for name in order})
    runs: dict[str, list[dict]] = {name: [] for name in order}
    with worktree(args.against) as before_src, cpu_hog(args.hog):
        for _ in range(args.runs):
            for name in order:
                src = before_src if name == "elastimator_before" else None
                runs[name].append(run_contender(pythons[name], name, args, src))
    result = {
        "benchmark": "frameworks",
        "model": "DeepFM-like: 13 dense + 26 hashed categorical (10k buckets each), embedding 8, FM + MLP 64-32, Adam",
        "batch_size": args.batch_size, "steps": args.steps, "warmup": args.warmup,
        "eval_batches": args.eval_batches, "runs": args.runs, "device": args.device, "hog": args.hog,
        "versions": {name: results[0]["tensorflow"] for name, results in runs.items()},
        "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}",
        "all_runs": runs,
        **summarize(runs),
    }
    write(result, args.out)
    print(json.dumps({"medians": result["medians"], "ratios": result["ratios"]}, indent=2))
    return result


if __name__ == "__main__":
    main()
