"""Where every benchmark leaves its results: <out>/<name>.json and <out>/<name>.md."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
"""Where results are committed: bench/results/."""


def add_timed_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every side-by-side training benchmark takes: batch, steps, warm-up, runs, output folder."""
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=RESULTS)


def rate_rows(rates: dict[str, list[float]], median: dict[str, float]) -> str:
    """Markdown rows `| name | median | run, run, ... |`, rates formatted with thousands separators."""
    return "".join(f"| {k} | {median[k]:,.0f} | {', '.join(f'{v:,.0f}' for v in rates[k])} |\n" for k in rates)


def median_interval(values: list[float], confidence: float = 0.9, resamples: int = 2000,
                    seed: int = 0) -> tuple[float, float]:
    """A percentile-bootstrap interval for the median of `values` (e.g. one cost per round): how far the
    median could move were the rounds run again. Seeded, so the same rounds give the same interval."""
    draw = random.Random(seed)
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - confidence) / 2
    return medians[int(tail * resamples)], medians[min(resamples - 1, int((1 - tail) * resamples))]


def write_results(out: str, name: str, result: dict, markdown: str) -> None:
    """Writes the result as JSON and the table as Markdown under `out`, and prints the JSON."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(markdown)
    print(json.dumps(result, indent=2))


@contextlib.contextmanager
def worktree(rev: str | None):
    """The `src` folder of a temporary git worktree of `rev` (None without one): another version's code, for a
    benchmark's side-by-side run."""
    if rev is None:
        yield None
        return
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "tree")
        subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", tree, rev], check=True,
                       capture_output=True)
        try:
            yield os.path.join(tree, "src")
        finally:
            subprocess.run(["git", "-C", repo, "worktree", "remove", "--force", tree], check=False,
                           capture_output=True)


@contextlib.contextmanager
def cpu_hog(processes: int):
    """`processes` processes that keep a core busy each while the benchmark runs (none with 0): its figures
    measured on a loaded machine, the CPU a neighbouring job or a busy node leaves."""
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()
