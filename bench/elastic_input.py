"""The cost of elastic input: training examples/s with a plain FileReader vs the same file through the
shard service (shards handed out over gRPC, every batch reported after its step).

Run:  python bench/elastic_input.py [--rows 200000] [--steps 300] [--runs 3]

Both train the DeepFM-like model on the Criteo-shaped file; runs alternate, medians are reported.
Results go to bench/results/elastic_input.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "criteo"))

import tensorflow as tf  # noqa: E402

import deepfm  # noqa: E402
import elastimator as est  # noqa: E402
import generate_data  # noqa: E402
from elastimator.data import DataSetInput, DataSetSpec, FileReader  # noqa: E402
from elastimator.elastic.feed import ShardFeed, ShardReportHook  # noqa: E402
from elastimator.elastic.service import ShardClient, ShardServer, ShardService  # noqa: E402
from elastimator.elastic.shards import DatasetSpec  # noqa: E402
from timing import WindowTimer  # noqa: E402

RESULTS = os.path.join(HERE, "results")
TOKEN = "bench-token"


def criteo_model_fn(features, labels, mode):
    """DeepFM over the raw Criteo columns: log of the counts, hashed categories."""
    dense = tf.math.log1p(tf.cast(tf.stack([features[f"I{i}"] for i in range(1, 14)], axis=1), tf.float32))
    ids = tf.strings.to_hash_bucket_fast(tf.stack([features[f"C{i}"] for i in range(1, 27)], axis=1),
                                         deepfm.BUCKETS)
    labels = tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)
    return deepfm.make_model_fn(est)({"dense": dense, "ids": ids}, labels, mode)




def run(path: str, elastic: bool, args) -> float:
    spec = DataSetSpec(reader=FileReader(path), columns=generate_data.columns(), batch_size=args.batch_size,
                       name="train_set")
    timer = WindowTimer(args.warmup)
    hooks = [timer]
    server = feed = None
    if elastic:
        server = ShardServer(ShardService(TOKEN)).start()
        client = ShardClient(server.address, TOKEN, worker="bench")
        feed = ShardFeed(client, DatasetSpec(name="train_set", size=spec.reader.data_nums,
                                             shard_size=10 * args.batch_size)).start()
        hooks.append(ShardReportHook(feed))
    try:
        with tempfile.TemporaryDirectory() as model_dir:
            estimator = est.Estimator(criteo_model_fn, model_dir=model_dir, config=est.RunConfig(tf_random_seed=1))
            estimator.train(DataSetInput(spec, feed=feed), hooks=hooks, steps=args.steps)
    finally:
        if feed is not None:
            feed.stop()
        if server is not None:
            server.stop()
    return timer.rate(args.batch_size)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args(argv)
    rates = {"file_reader": [], "elastic": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "criteo.tsv")
        generate_data.generate(path, args.rows)
        for _ in range(args.runs):
            rates["file_reader"].append(run(path, False, args))
            rates["elastic"].append(run(path, True, args))
    median = {k: statistics.median(v) for k, v in rates.items()}
    cost = 1 - median["elastic"] / median["file_reader"]
    result = {"benchmark": "elastic_input", "rows": args.rows, "batch_size": args.batch_size, "steps": args.steps,
              "runs": args.runs, "train_examples_per_sec": rates, "median": median, "throughput_cost": cost,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}"}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "elastic_input.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(args.out, "elastic_input.md"), "w") as f:
        f.write(f"# Elastic input vs a plain FileReader\n\nDeepFM-like model on a Criteo-shaped file ({args.rows} "
                f"rows), batch {args.batch_size}, {args.steps} steps ({args.warmup} warm-up), median of {args.runs} "
                f"interleaved runs. Machine: {result['machine']}.\n\n| input | train examples/s | runs |\n|---|---|---|\n"
                + "".join(f"| {k} | {median[k]:,.0f} | {', '.join(f'{v:,.0f}' for v in rates[k])} |\n" for k in rates)
                + f"\n**Throughput cost of elastic input: {cost:.1%}**\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
