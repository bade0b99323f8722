"""One worker of a MultiWorkerMirroredStrategy job, as TensorFlow's "Multi-worker training with Estimator" tutorial
runs it: TF_CONFIG with workers only, the strategy made first, `train_and_evaluate` with
`RunConfig(train_distribute=strategy)`, an input_fn that shards by its input_context. Or, with index "plain",
the same model trained in one process on the global batch.

Usage: python multi_worker_program.py INDEX|plain MODEL_DIR PORT [PORT ...]
With ELASTIMATOR_TEST_SLOW_STEPS=N set, trains to step N, each step at least 0.2 s (printing STEP), with a
checkpoint every 10 steps: for a test that kills a worker. With ELASTIMATOR_TEST_UNEVEN=K set, the last worker's
input ends K batches before the others' (and "plain" trains on what the workers then train: the last worker's
last batch again in each of those K steps), with no max_steps: training ends with the input.
Prints `RESULT {json}`: the global step, the weights and the training loss of each step (the chief's events).
"""

import json
import os
import sys
import time

import numpy as np

INDEX, MODEL_DIR, PORTS = sys.argv[1], sys.argv[2], sys.argv[3:]
if INDEX != "plain":
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in PORTS]},
                                          "task": {"type": "worker", "index": int(INDEX)}})

import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import elastimator as est  # noqa: E402
from tests.helpers import read_events, regression_model_fn  # noqa: E402

PER_REPLICA = 4
SLOW_STEPS = int(os.environ.get("ELASTIMATOR_TEST_SLOW_STEPS", "0"))
STEPS = SLOW_STEPS or 10
WORKERS = len(PORTS)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(PER_REPLICA * WORKERS * STEPS, 3)).astype(np.float32)
Y = (X @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
UNEVEN = int(os.environ.get("ELASTIMATOR_TEST_UNEVEN", "0"))
SEEN = []


def _uneven_plain_batches():
    """The global batches of the workers when the last one's input ends UNEVEN batches early and it trains its
    last batch again meanwhile."""
    per_worker = [X[w::WORKERS] for w in range(WORKERS)]
    batches = []
    for step in range(STEPS):
        parts = [per_worker[w][PER_REPLICA * step:PER_REPLICA * (step + 1)] for w in range(WORKERS - 1)]
        last = min(step, STEPS - UNEVEN - 1)
        parts.append(per_worker[-1][PER_REPLICA * last:PER_REPLICA * (last + 1)])
        batches.append(np.concatenate(parts))
    x = np.concatenate(batches)
    return x, (x @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)


def input_fn(mode, input_context=None):
    dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
    if SLOW_STEPS:
        dataset = dataset.repeat()
    if input_context:
        SEEN.append([input_context.num_input_pipelines, input_context.input_pipeline_id])
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        if UNEVEN and input_context.input_pipeline_id == input_context.num_input_pipelines - 1:
            dataset = dataset.take(PER_REPLICA * (STEPS - UNEVEN))
        return dataset.batch(PER_REPLICA)
    if UNEVEN and mode == est.ModeKeys.TRAIN:
        return tf.data.Dataset.from_tensor_slices(({"x": _uneven_plain_batches()[0]}, _uneven_plain_batches()[1])) \
            .batch(PER_REPLICA * WORKERS)
    return dataset.batch(PER_REPLICA * WORKERS)


class Slow(tf.compat.v1.train.SessionRunHook):
    def after_run(self, run_context, run_values):
        print("STEP", flush=True)
        time.sleep(0.2)


def main():
    strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy() if INDEX != "plain" else None
    config = est.RunConfig(train_distribute=strategy, save_summary_steps=1,
                           save_checkpoints_steps=10 if SLOW_STEPS else STEPS,
                           log_step_count_steps=None)
    estimator = est.Estimator(regression_model_fn, model_dir=MODEL_DIR, config=config)
    hooks = [Slow()] if SLOW_STEPS else []
    est.train_and_evaluate(estimator, est.TrainSpec(input_fn, max_steps=None if UNEVEN else STEPS, hooks=hooks),
                           est.EvalSpec(input_fn, steps=2, throttle_secs=0))
    result = {"is_chief": config.is_chief, "replicas": strategy.num_replicas_in_sync if strategy else 1,
              "input_contexts": SEEN}
    if config.is_chief:
        result.update(global_step=int(estimator.get_variable_value("global_step")),
                      weights={n: estimator.get_variable_value(n).ravel().tolist() for n in ("w", "b")},
                      losses=[loss for _, loss in read_events(MODEL_DIR)["loss"]])
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
