"""Embedding variables against the hash-bucket embedding they replace, and how a table grows with its ids.

Run:  python bench/embedding_variables.py [--steps 150] [--runs 3] [--growth 10000 100000 1000000 10000000]

1. Training throughput and peak memory. The same DeepFM-like model_fn (26 categorical features
   embedded in 8 dimensions and summed with 13 dense ones, a 64-32 DNN, sigmoid loss) on the same
   Criteo-shaped stream (ids drawn Zipf-like from per-feature vocabularies of 10^3..10^6), once with
   `categorical_column_with_hash_bucket(key, 100_000)` + `embedding_column` and once with
   `categorical_column_with_embedding` + `embedding_column`, with Adam and with Adagrad. Each run is
   a fresh process (so peak RSS is its own); runs alternate between the two, and the ratio of the
   medians is reported.
2. Growth. One embedding variable (dimension 8, Adagrad slots) takes training lookups of new ids,
   100,000 per step, in one process; at each size its ids, resident memory above the empty table,
   bytes per id, and the time per 100,000 new ids are recorded.

Output: bench/results/embedding_variables.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

FEATURES, DENSE, DIM, BUCKETS = 26, 13, 8, 100_000
VOCABULARIES = [10 ** (3 + (i % 4)) for i in range(FEATURES)]  # 10^3 .. 10^6 distinct ids per feature


def _stream(rows: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    features = {f"C{i}": ((rng.zipf(1.15, rows) % VOCABULARIES[i]) * 2_654_435_761 + i).astype(np.int64)
                for i in range(FEATURES)}
    features.update({f"I{i}": rng.random(rows, dtype=np.float32) for i in range(DENSE)})
    labels = (rng.random(rows) < 0.25).astype(np.float32)
    return features, labels


def _model_fn(features, labels, mode, params):
    import tensorflow as tf

    import elastimator as est
    from elastimator import embedding

    if params["variant"] == "hash_bucket":
        categorical = [tf.feature_column.categorical_column_with_hash_bucket(f"C{i}", BUCKETS, dtype=tf.int64)
                       for i in range(FEATURES)]
        embedded = [tf.feature_column.embedding_column(c, DIM) for c in categorical]
    else:
        categorical = [embedding.categorical_column_with_embedding(f"C{i}", dtype=tf.int64) for i in range(FEATURES)]
        embedded = [embedding.embedding_column(c, DIM) for c in categorical]
    dense = [tf.feature_column.numeric_column(f"I{i}") for i in range(DENSE)]
    net = tf.compat.v1.feature_column.input_layer(features, embedded + dense)
    for units in (64, 32):
        net = tf.compat.v1.layers.dense(net, units, activation=tf.nn.relu)
    logits = tf.squeeze(tf.compat.v1.layers.dense(net, 1), 1)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    optimizer = {"adam": tf.compat.v1.train.AdamOptimizer(0.001),
                 "adagrad": tf.compat.v1.train.AdagradOptimizer(0.05)}[params["optimizer"]]
    return est.EstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss, tf.compat.v1.train.get_global_step()))


def _train(variant: str, optimizer: str, batch: int, steps: int, warmup: int) -> dict:
    """One run, in this process: examples/s after the warm-up, and this process's peak RSS."""
    import tempfile

    import tensorflow as tf

    import elastimator as est
    from timing import WindowTimer

    features, labels = _stream(batch * (steps + warmup))

    def input_fn():
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch, drop_remainder=True).prefetch(2)

    timer = WindowTimer(warmup)
    with tempfile.TemporaryDirectory() as model_dir:
        estimator = est.Estimator(_model_fn, model_dir=model_dir, params={"variant": variant, "optimizer": optimizer},
                                  config=est.RunConfig(tf_random_seed=1, save_checkpoints_secs=None,
                                                       save_checkpoints_steps=None, save_summary_steps=None,
                                                       log_step_count_steps=None))
        estimator.train(input_fn, hooks=[timer])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"examples_per_s": timer.rate(batch), "peak_rss_mb": peak_mb}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _growth(sizes: list[int], step_ids: int = 100_000) -> list[dict]:
    """Feeds new ids into one embedding variable, `step_ids` per training step, and samples it at `sizes`."""
    import numpy as np
    import tensorflow as tf

    from elastimator import embedding
    from elastimator.embedding import engine

    rows = []
    with tf.Graph().as_default(), engine.model_fn_scope(training=True, num_ps=0):
        step = tf.compat.v1.train.get_or_create_global_step()
        ids = tf.compat.v1.placeholder(tf.int64, [None])
        table = embedding.get_embedding_variable("growing", DIM)
        loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids))
        train = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(loss, global_step=step)
        size = table.size()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train, {ids: [-1]})  # the first call sets the graph up; its one id is not counted
            base, fed, spent = _rss_mb(), 0, 0.0
            for target in sizes:
                while fed < target:
                    batch = np.arange(fed, min(target, fed + step_ids), dtype=np.int64) * 2_654_435_761
                    started = time.perf_counter()
                    session.run(train, {ids: batch})
                    spent += time.perf_counter() - started
                    fed += len(batch)
                grown = _rss_mb() - base
                rows.append({"ids": int(session.run(size)) - 1, "rss_above_empty_mb": grown,
                             "bytes_per_id": grown * 2**20 / fed, "ms_per_100k_new_ids": spent / fed * 1e5 * 1e3,
                             "dense_table_mb": fed * DIM * 4 * 2 / 2**20})
    return rows


def _rates(values: list[dict]) -> str:
    return ", ".join(f"{r['examples_per_s']:,.0f}" for r in values)


def main(argv=None) -> dict:
    from report import RESULTS, write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--optimizers", nargs="+", default=["adam", "adagrad"])
    parser.add_argument("--growth", type=int, nargs="+", default=[10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "OPTIMIZER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_train(*args.child, args.batch_size, args.steps, args.warmup)))
        return {}

    variants = ("hash_bucket", "embedding_variable")
    runs: dict[str, list[dict]] = {f"{v}/{o}": [] for o in args.optimizers for v in variants}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for _ in range(args.runs):  # interleaved: each round runs every variant once
        for key in runs:
            variant, optimizer = key.split("/")
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", variant, optimizer,
                                  "--batch-size", str(args.batch_size), "--steps", str(args.steps),
                                  "--warmup", str(args.warmup)], capture_output=True, text=True, env=env, check=True,
                                 cwd=os.path.dirname(os.path.abspath(__file__)))
            runs[key].append(json.loads(out.stdout.strip().splitlines()[-1]))
    median = {k: {m: statistics.median(r[m] for r in v) for m in ("examples_per_s", "peak_rss_mb")}
              for k, v in runs.items()}
    ratios = {o: {"throughput_hash_over_ev": median[f"hash_bucket/{o}"]["examples_per_s"]
                  / median[f"embedding_variable/{o}"]["examples_per_s"],
                  "memory_ev_over_hash": median[f"embedding_variable/{o}"]["peak_rss_mb"]
                  / median[f"hash_bucket/{o}"]["peak_rss_mb"]} for o in args.optimizers}
    growth = _growth(sorted(args.growth))
    result = {"benchmark": "embedding_variables", "runs": runs, "median": median, "ratios": ratios,
              "growth": growth, "target": "embedding variable within 1.3x of the hash-bucket throughput",
              "settings": {"batch": args.batch_size, "steps": args.steps, "warmup": args.warmup,
                           "features": FEATURES, "dim": DIM, "buckets": BUCKETS},
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}"}
    lines = [
        "# Embedding variables vs hash buckets\n",
        f"DeepFM-like model_fn, {FEATURES} categorical features (dimension {DIM}) + {DENSE} dense, batch "
        f"{args.batch_size}, {args.steps} timed steps after {args.warmup}, {args.runs} interleaved runs in fresh "
        f"processes (median). Hash buckets: {BUCKETS:,} per feature. Machine: {result['machine']}.\n",
        "| optimizer | embedding | examples/s | peak RSS MB | runs (examples/s) |", "|---|---|---|---|---|",
    ]
    for key, values in runs.items():
        variant, optimizer = key.split("/")
        lines.append(f"| {optimizer} | {variant} | {median[key]['examples_per_s']:,.0f} | "
                     f"{median[key]['peak_rss_mb']:,.0f} | {_rates(values)} |")
    lines += ["", "| optimizer | hash-bucket throughput / embedding-variable throughput | embedding-variable memory / "
              "hash-bucket memory |", "|---|---|---|"]
    lines += [f"| {o} | {r['throughput_hash_over_ev']:.2f}x | {r['memory_ev_over_hash']:.2f}x |"
              for o, r in ratios.items()]
    lines += ["", "## Growth of one table (dimension 8, Adagrad), 100,000 new ids per step\n",
              "| ids | RSS above the empty table | bytes per id | ms per 100k new ids "
              "| a dense table + slot of that many rows |",
              "|---|---|---|---|---|"]
    lines += [f"| {g['ids']:,} | {g['rss_above_empty_mb']:,.1f} MB | {g['bytes_per_id']:.0f} | "
              f"{g['ms_per_100k_new_ids']:.0f} | {g['dense_table_mb']:,.1f} MB |" for g in growth]
    write_results(args.out, "embedding_variables", result, "\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
