"""How throughput and memory grow with the data: `elastimator run` at 10^5..10^7 records, and the shard service
at 10^4..10^7 shards.

Run:  python bench/scale_curves.py [--records 100000 1000000 10000000] [--shards 10000 100000 1000000 10000000]

Records. A Criteo-shaped file (examples/criteo/generate_data.py) of `--base` rows is written once and repeated
to each size (the job reads, parses and trains every record once; nothing depends on the rows being distinct).
Each size runs `elastimator run bench/scale_conf.py:ScaleConf` (DeepFM, batch 512, one epoch) in a process of its
own. Throughput is the median of the job's own `global_step/sec` summaries times the batch, so interpreter start
and graph building are left out; peak memory is the process's maximum RSS (from wait4). The input is streamed,
so the peak should not grow with the data.

Shards. Per size, a process of its own registers a data set of N shards (2 epochs, shuffled) with a ShardService
and runs `--cycles` request-and-report cycles of 16 workers through its handlers (no gRPC), then seals the book.
It reports cycles/s, the seal's time, and the process's peak RSS beside its RSS before the data set existed.

Output: bench/results/scale_curves.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "criteo"))

import generate_data  # noqa: E402
from report import RESULTS, write_results  # noqa: E402

BATCH = 512
WORKERS = 16
RECORDS_PER_SHARD = 100


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def _run_measured(command: list[str], env: dict | None = None) -> tuple[int, float, float, str]:
    """Runs a process to its end; returns its exit code, wall seconds, peak RSS (MB) and stdout."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        return process.returncode, time.perf_counter() - start, usage.ru_maxrss / 1024, out.read()


# --- records -----------------------------------------------------------------------------------------------

def _repeat(base: str, times: int, path: str) -> None:
    with open(path, "wb") as out:
        for _ in range(times):
            with open(base, "rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)


def _steps_per_sec(model_dir: str) -> list[float]:
    import tensorflow as tf

    values = []
    for path in tf.io.gfile.glob(os.path.join(model_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            values += [v.simple_value for v in event.summary.value if v.tag == "global_step/sec"]
    return values


def measure_records(sizes: list[int], base_rows: int, workdir: str, log_steps: int) -> list[dict]:
    base = os.path.join(workdir, "base.tsv")
    generate_data.generate(base, base_rows, seed=0)
    rows = []
    for size in sizes:
        if size % base_rows:
            raise SystemExit(f"--records {size} is not a multiple of --base {base_rows}")
        data = os.path.join(workdir, f"criteo-{size}.tsv")
        _repeat(base, size // base_rows, data)
        model_dir = os.path.join(workdir, f"model-{size}")
        env = dict(os.environ, SCALE_DATA=data, SCALE_MODEL_DIR=model_dir, SCALE_LOG_STEPS=str(log_steps),
                   TF_CPP_MIN_LOG_LEVEL="2")
        code, wall, peak, out = _run_measured(
            [sys.executable, "-m", "elastimator.cli", "run", os.path.join(HERE, "scale_conf.py") + ":ScaleConf",
             "--no-progress", "--no-summary"], env)
        if code != 0:
            raise SystemExit(f"elastimator run at {size} records exited {code}:\n{out[-3000:]}")
        rates = _steps_per_sec(model_dir)
        rows.append({"records": size, "examples_per_sec": statistics.median(rates) * BATCH, "rate_samples": len(rates),
                     "peak_rss_mb": peak, "wall_secs": wall, "file_mb": os.path.getsize(data) / 2**20})
        print(json.dumps(rows[-1]), flush=True)
        os.remove(data)
        shutil.rmtree(model_dir, ignore_errors=True)
    return rows


# --- shards ------------------------------------------------------------------------------------------------

def _shard_child(shards: int, cycles: int) -> dict:
    """In a process of its own: the service's cost at `shards` shards."""
    from elastimator.elastic.service import ShardService

    before = _rss_mb()
    service = ShardService("scale-bench")
    dataset = {"name": "train", "size": shards * RECORDS_PER_SHARD, "shard_size": RECORDS_PER_SHARD, "epochs": 2,
               "shuffle": True, "seed": 1}
    start = time.perf_counter()
    service.handle("add_dataset", {"dataset": dataset, "worker": "chief-0"})
    add_secs = time.perf_counter() - start
    start = time.perf_counter()
    for cycle in range(cycles):
        worker = f"worker-{cycle % WORKERS}"
        shard = service.handle("request", {"dataset": "train", "worker": worker})
        service.handle("report", {"dataset": "train", "worker": worker, "shard_id": shard["shard_id"],
                                  "consumed": shard["end"] - shard["start"], "offset": shard["start"],
                                  "lease": shard["lease"]})
    cycle_secs = time.perf_counter() - start
    start = time.perf_counter()
    service.handle("seal", {"worker": "chief-0", "checkpoint_step": 1})
    seal_secs = time.perf_counter() - start
    return {"shards": shards, "cycles_per_sec": cycles / cycle_secs, "add_dataset_ms": add_secs * 1e3,
            "seal_ms": seal_secs * 1e3, "rss_before_mb": before}


def measure_shards(sizes: list[int], cycles: int) -> list[dict]:
    rows = []
    for shards in sizes:
        code, _, peak, out = _run_measured([sys.executable, __file__, "--child-shards", str(shards),
                                            "--cycles", str(cycles)])
        if code != 0:
            raise SystemExit(f"the shard child at {shards} shards exited {code}:\n{out[-3000:]}")
        row = json.loads(out.strip().splitlines()[-1])
        row["peak_rss_mb"] = peak
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


# --- report ------------------------------------------------------------------------------------------------

def plot(records: list[dict], shards: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 2, figsize=(10, 7))
    panels = [
        (axes[0][0], records, "records", "examples_per_sec", "elastimator run: train examples/s"),
        (axes[0][1], records, "records", "peak_rss_mb", "elastimator run: peak RSS (MB)"),
        (axes[1][0], shards, "shards", "cycles_per_sec", "shard service: request+report cycles/s"),
        (axes[1][1], shards, "shards", "peak_rss_mb", "shard service process: peak RSS (MB)"),
    ]
    for axis, rows, x, y, title in panels:
        if not rows:
            axis.set_visible(False)
            continue
        axis.plot([r[x] for r in rows], [r[y] for r in rows], marker="o")
        axis.set_xscale("log")
        axis.set_ylim(bottom=0)
        axis.set_title(title, fontsize=10)
        axis.set_xlabel(x)
        axis.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def markdown(result: dict) -> str:
    lines = ["# Scale curves: throughput and memory as the data grows\n\n",
             f"Machine: {result['machine']}. See bench/scale_curves.py for the method; the curves are in "
             "`scale_curves.png`.\n\n"]
    if result["records"]:
        lines += ["## `elastimator run` (DeepFM, batch 512, one epoch, FileReader)\n\n",
                  "| records | file | train examples/s | peak RSS | wall (start to exit) |\n|---|---|---|---|---|\n"]
        lines += [f"| {r['records']:,} | {r['file_mb']:,.0f} MB | {r['examples_per_sec']:,.0f} | "
                  f"{r['peak_rss_mb']:,.0f} MB | {r['wall_secs']:,.1f} s |\n" for r in result["records"]]
        first, last = result["records"][0], result["records"][-1]
        lines.append(f"\nFrom {first['records']:,} to {last['records']:,} records: peak RSS "
                     f"{last['peak_rss_mb'] / first['peak_rss_mb']:.2f}x, throughput "
                     f"{last['examples_per_sec'] / first['examples_per_sec']:.2f}x.\n\n")
    if result["shards"]:
        lines += [f"## Shard service ({WORKERS} workers, {RECORDS_PER_SHARD} records a shard, 2 shuffled epochs)\n\n",
                  "| shards | request+report cycles/s | add_dataset | seal | RSS before | peak RSS |\n"
                  "|---|---|---|---|---|---|\n"]
        lines += [f"| {r['shards']:,} | {r['cycles_per_sec']:,.0f} | {r['add_dataset_ms']:.1f} ms | "
                  f"{r['seal_ms']:.1f} ms | {r['rss_before_mb']:,.0f} MB | {r['peak_rss_mb']:,.0f} MB |\n"
                  for r in result["shards"]]
        first, last = result["shards"][0], result["shards"][-1]
        lines.append(f"\nFrom {first['shards']:,} to {last['shards']:,} shards: peak RSS "
                     f"{last['peak_rss_mb'] / first['peak_rss_mb']:.2f}x, cycles/s "
                     f"{last['cycles_per_sec'] / first['cycles_per_sec']:.2f}x.\n")
    return "".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="*", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--base", type=int, default=100_000, help="rows generated, then repeated to each size")
    parser.add_argument("--shards", type=int, nargs="*", default=[10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument("--cycles", type=int, default=20_000)
    parser.add_argument("--log-steps", type=int, default=100, help="steps per global_step/sec sample")
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--child-shards", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_shards is not None:
        print(json.dumps(_shard_child(args.child_shards, args.cycles)))
        return {}
    with tempfile.TemporaryDirectory() as workdir:
        records = measure_records(args.records, args.base, workdir, args.log_steps) if args.records else []
    shards = measure_shards(args.shards, args.cycles) if args.shards else []
    result = {"machine": f"{os.cpu_count()} CPUs, {platform.platform()}", "batch_size": BATCH,
              "records": records, "shards": shards}
    write_results(args.out, "scale_curves", result, markdown(result))
    plot(records, shards, os.path.join(args.out, "scale_curves.png"))
    return result


if __name__ == "__main__":
    main()
