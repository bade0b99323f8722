"""What each part of fused Adam's embedding update is worth on CPU.

Run:  python bench/embedding_gradient.py [--steps 50] [--runs 10] [--rounds 7]

elastimator's fused Adam (src/elastimator/estimator/graph/fused_updates.py) turns an
embedding's sparse gradient into a dense one and applies it with TensorFlow's
fused Adam kernel. Two choices in it are measured here, each against the shipped
code with that choice undone:

- `copy_on_read`: the update leaves the table in the copy-on-read mode its
  lookup put it in, so the Adam kernel copies the whole table first (the code
  before DisableCopyOnRead);
- `unsorted_segment_sum`: the rows are summed with `unsorted_segment_sum`
  instead of the sparse-dense product (the same bits).

Four trainers train the DeepFM-like model of bench/deepfm.py, each in a process
of its own, in turns (timing.RoundRobin): `shipped`, the two above, and
`shipped_again`, the control, whose difference from `shipped` is the
measurement's noise. An op-level timing updates one of the model's tables alone
(after a lookup, as in training). Results go to
bench/results/embedding_gradient.{json,md}.
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
from elastimator.estimator.graph import fused_updates  # noqa: E402

SHIPPED, CONTROL = "shipped", "shipped_again"
UNDONE = {  # a choice undone: the fused_updates function it swaps back
    "copy_on_read": ("_in_place", lambda variable, after: []),
    "unsorted_segment_sum": ("_sum_rows", lambda grad, indices, rows, device: tf.math.unsorted_segment_sum(
        grad, indices, num_segments=rows)),
}
TRAINERS = (SHIPPED, *UNDONE, CONTROL)


def _undo(name: str) -> None:
    if name in UNDONE:
        attribute, replacement = UNDONE[name]
        setattr(fused_updates, attribute, replacement)


def train(name: str, turn_hook, args, steps: int, tmp: str) -> None:
    """One trainer, in a process of its own, its choice undone before the graph is built."""
    _undo(name)
    estimator = est.Estimator(deepfm.make_model_fn(est), model_dir=os.path.join(tmp, name),
                              config=est.RunConfig(tf_random_seed=1, save_checkpoints_steps=None,
                                                   save_checkpoints_secs=None, log_step_count_steps=None,
                                                   save_summary_steps=None))
    estimator.train(lambda: deepfm.dataset(args.batch_size), hooks=[turn_hook], steps=steps)


def _table_update(name: str, batch_size: int) -> tuple[tf.Graph, tf.Operation]:
    """A graph that looks up one [260,000, 8] table with the model's ids and updates it with fused Adam."""
    rows, ids_shape = deepfm.NUM_SPARSE * deepfm.BUCKETS, [batch_size, deepfm.NUM_SPARSE]
    original = {attribute: getattr(fused_updates, attribute) for attribute, _ in UNDONE.values()}
    _undo(name)
    try:
        with tf.Graph().as_default() as graph, fused_updates.fused_sparse_adam():
            table = tf.Variable(tf.random.normal([rows, deepfm.EMBEDDING]))
            step = tf.Variable(0, dtype=tf.int64)
            seed = tf.stack([step, tf.constant(3, tf.int64)])
            offsets = tf.range(deepfm.NUM_SPARSE, dtype=tf.int64) * deepfm.BUCKETS
            ids = tf.random.stateless_uniform(ids_shape, seed, maxval=deepfm.BUCKETS, dtype=tf.int64) + offsets
            weights = tf.random.stateless_normal(ids_shape + [deepfm.EMBEDDING], seed)
            # Squared, so the gradient needs the looked-up rows and the lookup runs, as it does in training.
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(table, ids)) * weights)
            update = tf.group(tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss, var_list=[table]),
                              step.assign_add(1))
    finally:
        for attribute, value in original.items():
            setattr(fused_updates, attribute, value)
    return graph, update


def op_level(batch_size: int, calls: int = 20, repeats: int = 15) -> dict[str, float]:
    """Milliseconds per lookup + update of one of the model's tables, for the shipped code and each choice
    undone, in turns."""
    sessions = {}
    for name in (SHIPPED, *UNDONE):
        graph, update = _table_update(name, batch_size)
        session = tf.compat.v1.Session(graph=graph)
        with graph.as_default():
            session.run(tf.compat.v1.global_variables_initializer())
        sessions[name] = (session, update)
    times = {name: [] for name in sessions}
    try:
        for _ in range(repeats):
            for name, (session, update) in sessions.items():
                session.run(update)
                started = time.perf_counter()
                for _ in range(calls):
                    session.run(update)
                times[name].append((time.perf_counter() - started) / calls * 1e3)
    finally:
        for session, _ in sessions.values():
            session.close()
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
                       "speedup": {name: rates[SHIPPED] / rates[name] for name in UNDONE},
                       "control": rates[CONTROL] / rates[SHIPPED]})
    result = {"benchmark": "embedding_gradient", "batch_size": args.batch_size, "steps_per_turn": args.steps,
              "turns": args.runs, "warmup_steps": args.warmup, "rounds": rounds,
              "train_examples_per_sec": {name: statistics.median(r["train_examples_per_sec"][name] for r in rounds)
                                         for name in TRAINERS},
              "speedup": {name: statistics.median(r["speedup"][name] for r in rounds) for name in UNDONE},
              "control": statistics.median(r["control"] for r in rounds),
              "op_level_ms_per_update": ops,
              "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, TF {tf.__version__}"}
    rows = "".join(f"| {i + 1} | " + " | ".join(f"{r['train_examples_per_sec'][n]:,.0f}" for n in TRAINERS)
                   + " | " + " | ".join(f"{r['speedup'][n]:.3f}" for n in UNDONE) + f" | {r['control']:.3f} |\n"
                   for i, r in enumerate(rounds))
    markdown = (
        "# Fused Adam's embedding update on CPU: what each part is worth\n\n"
        f"DeepFM-like model (bench/deepfm.py: two tables of 260,000 rows), batch {args.batch_size}, one step per "
        "session call (the turn hook acts on every call), no checkpoints or summaries. Each trainer runs in a "
        f"process of its own; they train in turns of {args.steps} steps, {args.runs} timed turns each after "
        f"{args.warmup} warm-up steps; each of {args.rounds} rounds starts fresh processes. `shipped` is "
        "elastimator as shipped; `copy_on_read` leaves the looked-up table in copy-on-read mode, so the Adam "
        "kernel copies it first; `unsorted_segment_sum` sums the rows with that op instead of the sparse-dense "
        "product; `shipped_again` is the shipped code again, its ratio to `shipped` (control) the measurement's "
        f"noise. Machine: {result['machine']}.\n\n"
        "| round | " + " | ".join(f"{n} ex/s" for n in TRAINERS) + " | "
        + " | ".join(f"shipped / {n}" for n in UNDONE) + " | control |\n"
        + "|---" * (len(TRAINERS) + len(UNDONE) + 2) + "|\n" + rows
        + "\n**Shipped over each choice undone (median of the rounds): "
        + ", ".join(f"{result['speedup'][n]:.3f}x over {n}" for n in UNDONE)
        + f"**; the control (the same code twice) measured {result['control']:.3f}x.\n\n"
        f"One table alone (a lookup of the model's ids in one [{deepfm.NUM_SPARSE * deepfm.BUCKETS:,}, "
        f"{deepfm.EMBEDDING}] table, then its fused Adam update, in turns of 20 calls, median of 15): "
        + ", ".join(f"{name} {ms:.2f} ms" for name, ms in ops.items()) + ".\n"
    )
    write_results(args.out, "embedding_gradient", result, markdown)
    return result


if __name__ == "__main__":
    main()
