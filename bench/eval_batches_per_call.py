"""Would several evaluation batches per session call pay? The per-batch saving against the loop's building cost.

Run:  python bench/eval_batches_per_call.py [--batches 200] [--rounds 7] [--per-call 20]

Training runs several steps per session call (elastimator.estimator.step.multi_step): the step is copied into a
graph-mode while loop. The same could be done for evaluation: copy one batch's metric updates (back to the input
iterator and the variables, which are shared) into a loop, and run `--per-call` batches per call. This measures,
in one process per model, interleaved over `--rounds` rounds of `--batches` batches each:

- `one_per_call`: one batch per `Session.make_callable` call (what a kept evaluation graph runs, warm_graphs.py);
- `one_per_hooked_call`: one batch per call of elastimator's monitored session with FinalOpsHook and a hook that
  stops after N batches (as `evaluate(steps=N)` ran before the loop): one batch per call with hooks, as 2.15 ran;
- `loop`: `--per-call` batches per call through the copied loop;
- `copy_secs`: building the loop (the copy of one batch's ops), paid once per graph.

for two models: the DeepFM of deepfm.py (batch 512; about 1 ms of kernels per batch on this machine) and a
linear model over the same features (batch 64), where the call around a batch is a larger share. The break-even
is the number of batches after which the loop's saving has paid for its building.

Then, end to end, `Estimator.evaluate` over `--long` batches in a kept graph, with the loop and with one batch
per call (multi_batch.FEW_BATCHES set out of reach), alternating in one process per model, `--rounds` calls each.

Results go to bench/results/eval_batches_per_call.{json,md}.
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

import tensorflow as tf  # noqa: E402

import deepfm  # noqa: E402
import report  # noqa: E402
import timing  # noqa: E402


def linear_model_fn(est):
    """A linear click model over deepfm's features: little work per batch."""

    def model_fn(features, labels, mode, params):
        del params
        offsets = tf.range(deepfm.NUM_SPARSE, dtype=tf.int64) * deepfm.BUCKETS
        weights = tf.compat.v1.get_variable("weights", [deepfm.NUM_SPARSE * deepfm.BUCKETS, 1],
                                            initializer=tf.compat.v1.zeros_initializer())
        dense = tf.compat.v1.get_variable("dense", [deepfm.NUM_DENSE, 1], initializer=tf.compat.v1.zeros_initializer())
        logits = tf.reduce_sum(tf.nn.embedding_lookup(weights, features["ids"] + offsets), axis=1)
        logits += tf.matmul(features["dense"], dense)
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions={"probabilities": tf.sigmoid(logits)})
        loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
        probabilities = tf.sigmoid(logits)
        metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.round(probabilities)),
                   "auc": tf.compat.v1.metrics.auc(labels, probabilities)}
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)

    return model_fn


MODELS = {"deepfm": (deepfm.make_model_fn, 512), "linear": (linear_model_fn, 64)}


def measure(model: str, batches: int, rounds: int, per_call: int) -> dict:
    import elastimator as est
    from elastimator.estimator.contract.mode_keys import ModeKeys
    from elastimator.estimator.graph import model_graph
    from elastimator.estimator.loops import hooked_session
    from elastimator.estimator.loops import hooks as engine_hooks
    from elastimator.estimator.step import multi_batch

    make_model_fn, batch_size = MODELS[model]
    estimator = est.Estimator(make_model_fn(est), model_dir=tempfile.mkdtemp(), config=est.RunConfig(tf_random_seed=1))
    with tf.Graph().as_default():
        built = model_graph.build_for(estimator, ModeKeys.EVAL, lambda: deepfm.dataset(batch_size).repeat())
        metrics = model_graph.metrics_with_loss(built.spec)
        update = tf.group(*(update for _, update in metrics.values()))
        values = {key: value for key, (value, _) in metrics.items()}
        started = time.perf_counter()
        loop = multi_batch.build(update)
        copy_secs = time.perf_counter() - started
        iterator = built.input_hooks[0].iterator
        scaffold = tf.compat.v1.train.Scaffold(local_init_op=tf.group(
            tf.compat.v1.local_variables_initializer(), iterator.initializer))
        hooks = [tf.compat.v1.train.FinalOpsHook(values), engine_hooks.StopAfterStepsHook(10**9)]
        with hooked_session.ReusingMonitoredSession(tf.compat.v1.train.ChiefSessionCreator(scaffold=scaffold),
                                                    hooks) as hooked:
            session = hooked._tf_sess()  # pylint: disable=protected-access  (the same session, without the hooks)
            one, several = session.make_callable(update), session.make_callable(loop.run, feed_list=[loop.size])
            runs = {
                "one_per_call": lambda: [one() for _ in range(batches)],
                "one_per_hooked_call": lambda: [hooked.run(update) for _ in range(batches)],
                "loop": lambda: [several(per_call) for _ in range(batches // per_call)],
            }
            for run in runs.values():  # warm up: the executors, the input's prefetch
                run()
            secs: dict[str, list[float]] = {name: [] for name in runs}
            for order in timing.shuffled_rounds(list(runs), rounds):
                for name in order:
                    started = time.perf_counter()
                    runs[name]()
                    secs[name].append(time.perf_counter() - started)
    done = batches // per_call * per_call
    per_batch = {name: statistics.median(s) / (done if name == "loop" else batches) for name, s in secs.items()}
    saving = per_batch["one_per_call"] - per_batch["loop"]
    return {
        "model": model, "batch_size": batch_size, "ops_copied": loop.ops, "copy_secs": round(copy_secs, 4),
        "per_batch_ms": {name: round(value * 1000, 4) for name, value in per_batch.items()},
        "loop_speedup_over_one_per_call": round(per_batch["one_per_call"] / per_batch["loop"], 3),
        "loop_speedup_over_hooked_call": round(per_batch["one_per_hooked_call"] / per_batch["loop"], 3),
        "break_even_batches": round(copy_secs / saving) if saving > 0 else None,
        "break_even_batches_hooked": round(copy_secs / (per_batch["one_per_hooked_call"] - per_batch["loop"]))
        if per_batch["one_per_hooked_call"] > per_batch["loop"] else None,
    }


def measure_evaluate(model: str, batches: int, rounds: int) -> dict[str, list[float]]:
    """Seconds of `evaluate` calls over `batches` batches in kept graphs, with the loop (`loop`) and with one batch
    per call (`one_per_call`: multi_batch.FEW_BATCHES out of reach), in one process, alternating."""
    import elastimator as est
    from elastimator.estimator.step import multi_batch

    make_model_fn, batch_size = MODELS[model]
    model_dir = tempfile.mkdtemp()
    estimators = {name: est.Estimator(make_model_fn(est), model_dir=model_dir, config=est.RunConfig(tf_random_seed=1))
                  for name in ("loop", "one_per_call")}
    estimators["loop"].train(lambda: deepfm.dataset(batch_size), steps=1)
    few = {"loop": multi_batch.FEW_BATCHES, "one_per_call": 10**12}
    secs: dict[str, list[float]] = {name: [] for name in estimators}
    for order in [list(estimators)] + list(timing.shuffled_rounds(list(estimators), rounds)):
        for name in order:
            multi_batch.FEW_BATCHES = few[name]
            started = time.perf_counter()
            estimators[name].evaluate(lambda: deepfm.dataset(batch_size, batches))
            secs[name].append(time.perf_counter() - started)
    return {name: values[1:] for name, values in secs.items()}  # the first call of each built its graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--per-call", type=int, default=20)
    parser.add_argument("--long", type=int, default=2000, help="batches of the end-to-end evaluate calls")
    parser.add_argument("--out", default=report.RESULTS)
    args = parser.parse_args()
    results = [timing.in_fresh_processes(measure, model, args.batches, args.rounds, args.per_call) for model in MODELS]
    evaluate = {model: timing.in_fresh_processes(measure_evaluate, model, args.long, args.rounds) for model in MODELS}
    end_to_end = {model: {"secs": {name: round(statistics.median(s), 4) for name, s in secs.items()},
                          "speedup": round(statistics.median(secs["one_per_call"]) / statistics.median(secs["loop"]), 3)}
                  for model, secs in evaluate.items()}
    rows = "".join(
        f"| {r['model']} (batch {r['batch_size']}) | {r['per_batch_ms']['one_per_call']:.3f} | "
        f"{r['per_batch_ms']['one_per_hooked_call']:.3f} | {r['per_batch_ms']['loop']:.3f} | "
        f"{r['loop_speedup_over_one_per_call']:.2f}x / {r['loop_speedup_over_hooked_call']:.2f}x | "
        f"{r['ops_copied']} ops, {r['copy_secs'] * 1000:.0f} ms | {r['break_even_batches']} / "
        f"{r['break_even_batches_hooked']} |\n" for r in results)
    markdown = (
        "# Several evaluation batches per session call\n\n"
        f"{args.batches} batches per round, median of {args.rounds} interleaved rounds; the loop runs "
        f"{args.per_call} batches per call. Per batch, ms: one per `make_callable` call (a kept graph), one per "
        "hooked `MonitoredSession.run`, and through the loop.\n\n"
        "| model | one per call | one per hooked call | loop | loop speed-up (over one per call / hooked) "
        "| building the loop | break-even batches (one per call / hooked) |\n|---|---|---|---|---|---|---|\n"
        + rows
        + f"\n`Estimator.evaluate` over {args.long} batches in a kept graph, seconds (median of {args.rounds} "
          "interleaved calls each, in one process per model): with the loop, and with one batch per call "
          "(multi_batch.FEW_BATCHES out of reach).\n\n"
          "| model | loop | one per call | speed-up |\n|---|---|---|---|\n"
        + "".join(f"| {model} | {r['secs']['loop']:.3f} | {r['secs']['one_per_call']:.3f} | {r['speedup']:.2f}x |\n"
                  for model, r in end_to_end.items()))
    report.write_results(args.out, "eval_batches_per_call",
                         {"batches": args.batches, "rounds": args.rounds, "per_call": args.per_call,
                          "long": args.long, "tensorflow": tf.__version__,
                          "results": results, "evaluate": end_to_end}, markdown)


if __name__ == "__main__":
    main()
