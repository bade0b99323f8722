"""How fused Adam sums an embedding gradient's rows on CPU: a sparse-dense product vs unsorted_segment_sum.

Run:  python bench/embedding_gradient.py [--steps 50] [--runs 10] [--rounds 7]

elastimator's fused Adam (src/elastimator/estimator/fused_updates.py) turns an
embedding's sparse gradient into a dense one before TensorFlow's fused Adam
kernel. On CPU it sums the rows with `SparseTensorDenseMatMul` (a one-hot
matrix, transposed, times the rows); before, it used `unsorted_segment_sum`,
whose result is the same bit for bit. Three trainers train the DeepFM-like model
of bench/deepfm.py, each in a process of its own, in turns
(timing.RoundRobin): `sparse_dense_product` (elastimator as shipped),
`unsorted_segment_sum` (the same with the sum swapped back) and
`sparse_dense_product_again`, the control, whose difference from the first is
the measurement's noise. Results go to bench/results/embedding_gradient.{json,md}.
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
from timing import RoundRobin  # noqa: E402
import elastimator as est  # noqa: E402
from elastimator.estimator import fused_updates  # noqa: E402

TRAINERS = ("sparse_dense_product", "unsorted_segment_sum", "sparse_dense_product_again")
BASELINE = "unsorted_segment_sum"


def _segment_sum(grad, indices, rows, device):
    return tf.math.unsorted_segment_sum(grad, indices, num_segments=rows)


def train(name: str, turn_hook, args, steps: int, tmp: str) -> None:
    """One trainer, in a process of its own; the baseline swaps the sum back before the graph is built."""
    if name == BASELINE:
        fused_updates._sum_rows = _segment_sum  # pylint: disable=protected-access
    estimator = est.Estimator(deepfm.make_model_fn(est), model_dir=os.path.join(tmp, name),
                              config=est.RunConfig(tf_random_seed=1, save_checkpoints_steps=None,
                                                   save_checkpoints_secs=None, log_step_count_steps=None,
                                                   save_summary_steps=None))
    estimator.train(lambda: deepfm.dataset(args.batch_size), hooks=[turn_hook], steps=steps)


def op_level(batch_size: int, calls: int = 20, repeats: int = 15) -> dict[str, float]:
    """Milliseconds per update of the model's embedding table alone (dense gradient + Adam), both sums, in turns."""
    rows, ids_shape = deepfm.NUM_SPARSE * deepfm.BUCKETS, [batch_size, deepfm.NUM_SPARSE]
    with tf.Graph().as_default() as graph:
        table = tf.Variable(tf.random.normal([rows, deepfm.EMBEDDING]))
        step = tf.Variable(0, dtype=tf.int64)
        seed = tf.stack([step, tf.constant(3, tf.int64)])
        offsets = tf.range(deepfm.NUM_SPARSE, dtype=tf.int64) * deepfm.BUCKETS
        indices = tf.reshape(tf.random.stateless_uniform(ids_shape, seed, maxval=deepfm.BUCKETS, dtype=tf.int64)
                             + offsets, [-1])
        grad = tf.random.stateless_normal([batch_size * deepfm.NUM_SPARSE, deepfm.EMBEDDING], seed)
        optimizer = tf.compat.v1.train.AdamOptimizer(1e-3)
        updates = {}
        for name, sum_rows in (("sparse_dense_product", fused_updates._sum_rows), (BASELINE, _segment_sum)):
            dense = sum_rows(grad, indices, rows, table.device)
            updates[name] = tf.group(optimizer.apply_gradients([(dense, table)]), step.assign_add(1))
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            times = {name: [] for name in updates}
            for _ in range(repeats):
                for name, update in updates.items():
                    session.run(update)
                    started = time.perf_counter()
                    for _ in range(calls):
                        session.run(update)
                    times[name].append((time.perf_counter() - started) / calls * 1e3)
    return {name: statistics.median(ms) for name, ms in times.items()}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    add_timed_run_arguments(parser)
    parser.set_defaults(steps=50, runs=10)
    args = parser.parse_args(argv)
    ops = op_level(args.batch_size)
    rounds = []
    for _ in range(args.rounds):
        robin = RoundRobin(TRAINERS, steps=args.steps, warmup=args.warmup)
        with tempfile.TemporaryDirectory() as tmp:
            robin.run(train, args, args.warmup + args.runs * args.steps, tmp)
        rates = {name: robin.rate(name, args.batch_size) for name in TRAINERS}
        rounds.append({"train_examples_per_sec": rates,
                       "speedup": rates["sparse_dense_product"] / rates[BASELINE],
                       "control": rates["sparse_dense_product_again"] / rates["sparse_dense_product"]})
    result = {"benchmark": "embedding_gradient", "batch_size": args.batch_size, "steps_per_turn": args.steps,
              "turns": args.runs, "warmup_steps": args.warmup, "rounds": rounds,
              "train_examples_per_sec": {name: statistics.median(r["train_examples_per_sec"][name] for r in rounds)
                                         for name in TRAINERS},
              "speedup": statistics.median(r["speedup"] for r in rounds),
              "control": statistics.median(r["control"] for r in rounds),
              "op_level_ms_per_update": ops,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}"}
    rows = "".join(f"| {i + 1} | " + " | ".join(f"{r['train_examples_per_sec'][n]:,.0f}" for n in TRAINERS)
                   + f" | {r['speedup']:.3f} | {r['control']:.3f} |\n" for i, r in enumerate(rounds))
    markdown = (
        "# Fused Adam's dense embedding gradient on CPU: sparse-dense product vs unsorted_segment_sum\n\n"
        f"DeepFM-like model (bench/deepfm.py: two tables of 260,000 rows), batch {args.batch_size}, one step per "
        "session call (the turn hook acts on every call), no checkpoints or summaries. Each trainer runs in a process of its own; they train in turns of "
        f"{args.steps} steps, "
        f"{args.runs} timed turns each after {args.warmup} warm-up steps; each of {args.rounds} rounds starts "
        "fresh processes. `sparse_dense_product_again` is the shipped code again: its ratio to the first "
        "(control) is the measurement's noise. "
        f"Machine: {result['machine']}.\n\n"
        "| round | " + " | ".join(f"{n} ex/s" for n in TRAINERS) + " | speedup | control |\n"
        + "|---" * (len(TRAINERS) + 3) + "|\n" + rows
        + f"\n**Sparse-dense product / unsorted_segment_sum (median of the rounds): {result['speedup']:.3f}x**; "
        f"the control (the same code twice) measured {result['control']:.3f}x.\n\n"
        f"The update alone (one [{deepfm.NUM_SPARSE * deepfm.BUCKETS:,}, {deepfm.EMBEDDING}] table, the model's ids, "
        "dense gradient + Adam, in turns of 20 calls, median of 15): "
        + ", ".join(f"{name} {ms:.2f} ms" for name, ms in ops.items()) + ".\n"
    )
    write_results(args.out, "embedding_gradient", result, markdown)
    return result


if __name__ == "__main__":
    main()
