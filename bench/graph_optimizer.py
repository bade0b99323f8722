"""Does TensorFlow's graph optimizer (Grappler) pay for itself in an Estimator's sessions on the CPU?

Run:  python bench/graph_optimizer.py [--rounds 3] [--steps 330]

A v1 session runs Grappler once for every distinct set of fetches and feeds it is asked for: the first training
step, and also each variable initialization, restore, checkpoint save, iterator start and metric read, each over
the whole graph before its pruning. Those calls happen once or a few times per `train`, `evaluate` or `predict`
call, in front of the user's first step or batch; what Grappler buys is in the calls that repeat (rewrites and
fusions of the step). This measures both sides, for four kinds of model, with the sessions' config
`default_session_config` as elastimator makes it, the same config with `disable_meta_optimizer`, and with every
pass off but the remapper's fusions (`VARIANTS`):

- `first_step_secs`: from `train` to the end of its first session call (the model built, the session created,
  the first checkpoint saved, one step);
- `steps_per_sec`: the steps after the first call, to the end of training (several steps per call from the
  second call on, as automatic sizing does past 200 steps: the loop's building and first call included);
- `evaluate_secs` and `predict_secs`: a first `evaluate` and `predict` of 50 batches (graph, session, restore,
  batches), and `evaluate_again_secs`: a second one, which reuses the kept graph (the batches alone, nearly).

Each (model, variant) runs in a fresh process of its own, as a user's program would; rounds interleave them in a
shuffled order. Models: the DeepFM of deepfm.py (batch 512); the linear model of eval_batches_per_call.py
(batch 64); a small CNN (two 3x3 convolutions with ReLU and pooling, dense 128, batch 64 of 32x32x3); a recurrent
model (a GRU-like cell of 64 units over 20 steps, written with tf.scan, batch 64).

Results go to bench/results/graph_optimizer.{json,md}.
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

import report  # noqa: E402
import timing  # noqa: E402

VARIANTS = ("grappler", "no_grappler", "fusions_only")
"""Grappler as `default_session_config` runs it; off (`disable_meta_optimizer`); every pass off but the remapper's
fusions (MatMul/Conv2D + BiasAdd + activation into one oneDNN kernel: what a CNN's steps gain from Grappler),
tried as a middle way (it lost everywhere: results/graph_optimizer.md)."""
FUSIONS_ONLY_OFF = ("layout_optimizer", "constant_folding", "shape_optimization", "arithmetic_optimization",
                    "dependency_optimization", "loop_optimization", "function_optimization", "debug_stripper",
                    "common_subgraph_elimination", "implementation_selector", "pin_to_host_optimization",
                    "scoped_allocator_optimization")
MODELS = ("deepfm", "linear", "cnn", "rnn")
BATCHES = 50


def _cnn(est):
    import tensorflow as tf

    def model_fn(features, labels, mode):
        x = features
        for filters in (32, 64):
            kernel = tf.compat.v1.get_variable(f"conv{filters}", [3, 3, x.shape[-1], filters])
            bias = tf.compat.v1.get_variable(f"bias{filters}", [filters], initializer=tf.compat.v1.zeros_initializer())
            x = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(x, kernel, 1, "SAME"), bias))
            x = tf.nn.max_pool2d(x, 2, 2, "VALID")
        x = tf.reshape(x, [-1, 8 * 8 * 64])
        hidden = tf.compat.v1.get_variable("hidden", [8 * 8 * 64, 128])
        out = tf.compat.v1.get_variable("out", [128, 10])
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, hidden)), out)
        return _spec(est, mode, labels, logits)

    def input_fn(batches=None):
        images = tf.random.stateless_uniform([64, 32, 32, 3], seed=[1, 2])
        labels = tf.random.stateless_uniform([64], seed=[3, 4], maxval=10, dtype=tf.int32)
        data = tf.data.Dataset.from_tensors((images, labels))
        return data.repeat(batches) if batches else data.repeat()

    return model_fn, input_fn


def _rnn(est):
    import tensorflow as tf

    units, length = 64, 20

    def model_fn(features, labels, mode):
        gates = tf.compat.v1.get_variable("gates", [units + 8, 2 * units])
        candidate = tf.compat.v1.get_variable("candidate", [units + 8, units])
        out = tf.compat.v1.get_variable("out", [units, 10])

        def cell(state, x):
            z, r = tf.split(tf.sigmoid(tf.matmul(tf.concat([x, state], 1), gates)), 2, axis=1)
            proposed = tf.tanh(tf.matmul(tf.concat([x, r * state], 1), candidate))
            return z * state + (1 - z) * proposed

        steps = tf.transpose(features, [1, 0, 2])  # [time, batch, 8]
        states = tf.scan(cell, steps, initializer=tf.zeros([tf.shape(features)[0], units]))
        return _spec(est, mode, labels, tf.matmul(states[-1], out))

    def input_fn(batches=None):
        sequences = tf.random.stateless_uniform([64, length, 8], seed=[5, 6])
        labels = tf.random.stateless_uniform([64], seed=[7, 8], maxval=10, dtype=tf.int32)
        data = tf.data.Dataset.from_tensors((sequences, labels))
        return data.repeat(batches) if batches else data.repeat()

    return model_fn, input_fn


def _spec(est, mode, labels, logits):
    import tensorflow as tf

    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"classes": tf.argmax(logits, 1)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))}
    train_op = tf.compat.v1.train.AdamOptimizer(1e-3).minimize(loss, tf.compat.v1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def _model(name: str, est):
    """(model_fn, input_fn(batches=None)) of a model, its input yielding (features, labels)."""
    import deepfm
    import eval_batches_per_call

    if name == "deepfm":
        return deepfm.make_model_fn(est), lambda batches=None: deepfm.dataset(512, batches)
    if name == "linear":
        return eval_batches_per_call.linear_model_fn(est), lambda batches=None: deepfm.dataset(64, batches)
    return {"cnn": _cnn, "rnn": _rnn}[name](est)


def run(model: str, variant: str, steps: int) -> dict:
    """One fresh process's figures (see the module doc)."""
    import tensorflow as tf

    import elastimator as est
    from elastimator.estimator.contract import run_config

    session_config = run_config.default_session_config(est.RunConfig().cluster)
    rewrite = session_config.graph_options.rewrite_options
    rewrite.disable_meta_optimizer = variant == "no_grappler"
    if variant == "fusions_only":
        for name in FUSIONS_ONLY_OFF:
            setattr(rewrite, name, rewrite.OFF)
        rewrite.memory_optimization = rewrite.NO_MEM_OPT
        rewrite.disable_model_pruning = True
    model_fn, input_fn = _model(model, est)
    estimator = est.Estimator(model_fn, model_dir=tempfile.mkdtemp(), config=est.RunConfig(
        tf_random_seed=1, session_config=session_config, log_step_count_steps=None))
    calls: list[float] = []

    class FirstCall(tf.compat.v1.train.SessionRunHook):
        several_steps_per_call = True  # times calls, whatever they run

        def after_run(self, run_context, run_values):
            calls.append(time.perf_counter())

    started = time.perf_counter()
    estimator.train(input_fn, steps=steps, hooks=[FirstCall()])
    ended = time.perf_counter()
    result = {"first_step_secs": calls[0] - started, "steps_per_sec": (steps - 1) / (ended - calls[0])}
    for key in ("evaluate_secs", "evaluate_again_secs"):
        started = time.perf_counter()
        estimator.evaluate(lambda: input_fn(BATCHES))
        result[key] = time.perf_counter() - started
    started = time.perf_counter()
    for _ in estimator.predict(lambda: input_fn(BATCHES).map(lambda features, labels: features),
                               yield_single_examples=False):
        pass
    result["predict_secs"] = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=330)
    parser.add_argument("--out", default=report.RESULTS)
    args = parser.parse_args()
    runs: dict[str, dict[str, list[dict]]] = {m: {v: [] for v in VARIANTS} for m in MODELS}
    for order in timing.shuffled_rounds([(m, v) for m in MODELS for v in VARIANTS], args.rounds):
        for model, variant in order:
            runs[model][variant].append(timing.in_fresh_processes(run, model, variant, args.steps))
    metrics = ("first_step_secs", "steps_per_sec", "evaluate_secs", "evaluate_again_secs", "predict_secs")
    medians = {m: {v: {k: round(statistics.median(r[k] for r in runs[m][v]), 4) for k in metrics}
                   for v in VARIANTS} for m in MODELS}
    # Ratios as speed-ups over Grappler as elastimator runs it: above 1 means the variant is faster.
    ratios = {v: {m: {k: round(medians[m]["grappler"][k] / medians[m][v][k], 3) if k != "steps_per_sec"
                      else round(medians[m][v][k] / medians[m]["grappler"][k], 3) for k in metrics}
                  for m in MODELS} for v in VARIANTS[1:]}
    rows = "".join(
        f"| {m} | " + " | ".join(
            f"{medians[m]['grappler'][k]:.3g} / " + " / ".join(
                f"{medians[m][v][k]:.3g} ({ratios[v][m][k]:.2f}x)" for v in VARIANTS[1:]) for k in metrics)
        + " |\n" for m in MODELS)
    markdown = (
        "# Grappler in an Estimator's sessions on the CPU\n\n"
        f"`bench/graph_optimizer.py`: each model trains {args.steps} steps, then a first and a second `evaluate` "
        f"and a first `predict` of {BATCHES} batches, in a fresh process per model and variant; median of "
        f"{args.rounds} interleaved rounds. Each cell: with Grappler / without it / with its fusions only (each "
        "variant's speed-up over Grappler; above 1 is faster). Machine: " + f"{os.cpu_count()} CPUs.\n\n"
        "| model | time to the first step, s | steps/s after it | first evaluate, s | second evaluate, s | "
        "first predict, s |\n|---|---|---|---|---|---|\n" + rows)
    report.write_results(args.out, "graph_optimizer", {"medians": medians, "speedup_over_grappler": ratios,
                                                       "runs": runs, "steps": args.steps}, markdown)


if __name__ == "__main__":
    main()
