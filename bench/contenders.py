"""One contender of bench/frameworks.py, measured in its own process.

Usage: python contenders.py NAME --batch-size B --steps N --warmup W --eval-batches E
NAME: elastimator | elastimator_unfused | elastimator_one_step | elastimator_own_hook | elastimator_mirrored |
tf_estimator (run it with TF 2.15 + tensorflow-estimator) | keras_fit | tf_function

Prints one JSON line: train examples/s (after the warm-up steps), time to first
step, checkpoint save time, export time, evaluate and predict examples/s (a whole
call, as a user waits for it; then again after AGAIN_STEPS more training steps, as
a round of train_and_evaluate or a scoring job calls them), peak RSS (for the estimators, up to the end of the
second calls, before elastimator's warm Predictor, whose own peak is reported apart), and
the RSS right after `import tensorflow`, which every contender does first, as
programs do: peak RSS minus that is what the framework itself holds. Everything trains the DeepFM-like model of deepfm.py on
the same synthetic batches.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def peak_rss_mb() -> float:
    """The most resident memory the process has had so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """The process's resident memory now, in MiB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


AGAIN_STEPS = 20
"""Training steps between a verb's first call and its second (a new checkpoint for the second to read)."""


class Clock:
    """Timestamps of the training steps (a session call may run several)."""

    def __init__(self, warmup: int):
        self.warmup, self.steps, self.start, self.first, self.warm, self.last = warmup, 0, None, None, None, None
        self.warm_steps = 0

    def begin(self):
        self.start = time.perf_counter()

    def step(self, steps: int = 1):
        now = time.perf_counter()
        if self.steps == 0:
            self.first = now
        self.steps += steps
        if self.warm is None and self.steps >= self.warmup:
            self.warm, self.warm_steps = now, self.steps
        self.last = now

    def rate(self, batch_size: int) -> float:
        return (self.steps - self.warm_steps) * batch_size / (self.last - self.warm)


def _warm_predict_rate(estimator, receiver, args) -> float:
    """Examples/s of elastimator's warm Predictor over the same batches, fed as a server would feed them."""
    import deepfm

    batches = [features for features, _ in deepfm.dataset(args.batch_size, args.eval_batches).as_numpy_iterator()]
    with estimator.predictor(receiver) as predict:
        predict(batches[0])  # the first call pays for nothing the later ones skip, but keep it out anyway
        started = time.perf_counter()
        for batch in batches:
            predict(batch)
        return len(batches) * args.batch_size / (time.perf_counter() - started)


def _estimator(est, args, model_dir: str, own_hook: bool = False, **config) -> dict:
    import tensorflow as tf

    import deepfm

    clock = Clock(args.warmup)
    saves = []

    class Steps(tf.compat.v1.train.SessionRunHook):
        """Counts elastimator's steps of each session call, its calls possibly running several: the global step's
        advance, read from its ordered step read (the step before a call's last)."""

        several_steps_per_call = True

        def begin(self):
            reads = tf.compat.v1.get_collection("global_step_read_op_cache")
            self._after = reads[0] + 1 if reads else None
            self._last = None

        def after_create_session(self, session, coord):
            self._last = int(session.run(tf.compat.v1.train.get_global_step()))

        def before_run(self, run_context):
            return tf.compat.v1.train.SessionRunArgs(self._after) if self._after is not None else None

        def after_run(self, run_context, run_values):
            if self._after is None:
                clock.step()
                return
            clock.step(int(run_values.results) - self._last)
            self._last = int(run_values.results)

    class StepTimer(tf.compat.v1.train.SessionRunHook):
        """A program's own per-step timing hook, as users write them: it overrides after_run and says nothing
        about several steps per call, so elastimator runs one step per call, as tf.estimator does."""

        def after_run(self, run_context, run_values):
            clock.step()

    class SaveTimer(tf.compat.v1.train.CheckpointSaverListener):
        def before_save(self, session, step):
            self.started = time.perf_counter()

        def after_save(self, session, step):
            saves.append(time.perf_counter() - self.started)

    estimator = est.Estimator(deepfm.make_model_fn(est), model_dir=model_dir,
                              config=est.RunConfig(tf_random_seed=1, save_checkpoints_steps=args.steps, **config))
    clock.begin()
    timer = StepTimer() if own_hook or est.__name__ != "elastimator" else Steps()
    estimator.train(lambda: deepfm.dataset(args.batch_size), steps=args.steps, hooks=[timer],
                    saving_listeners=[SaveTimer()])
    examples = args.eval_batches * args.batch_size
    started = time.perf_counter()
    estimator.evaluate(lambda: deepfm.dataset(args.batch_size, args.eval_batches))
    eval_rate = examples / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in estimator.predict(lambda: deepfm.dataset(args.batch_size, args.eval_batches).map(lambda f, l: f),
                               yield_single_examples=False):
        pass
    predict_rate = examples / (time.perf_counter() - started)

    def receiver():
        placeholders = {"dense": tf.compat.v1.placeholder(tf.float32, [None, deepfm.NUM_DENSE]),
                        "ids": tf.compat.v1.placeholder(tf.int64, [None, deepfm.NUM_SPARSE])}
        return est.export.ServingInputReceiver(placeholders, placeholders)

    started = time.perf_counter()
    estimator.export_saved_model(os.path.join(model_dir, "export"), receiver)
    export_secs = time.perf_counter() - started
    result = {"train_examples_per_sec": clock.rate(args.batch_size),
              "time_to_first_step_secs": clock.first - clock.start, "checkpoint_save_secs": saves[-1],
              "export_secs": export_secs, "eval_examples_per_sec": eval_rate, "predict_examples_per_sec": predict_rate}
    # A round of train_and_evaluate, or of a scoring job: more training (a new checkpoint), then the same verbs
    # again, each given its input_fn anew.
    started = time.perf_counter()
    estimator.train(lambda: deepfm.dataset(args.batch_size), steps=AGAIN_STEPS)
    result["train_again_secs"] = time.perf_counter() - started
    started = time.perf_counter()
    estimator.train(lambda: deepfm.dataset(args.batch_size), steps=AGAIN_STEPS)  # right after a train call
    result["train_on_secs"] = time.perf_counter() - started
    started = time.perf_counter()
    estimator.evaluate(lambda: deepfm.dataset(args.batch_size, args.eval_batches))
    result["eval_again_examples_per_sec"] = examples / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in estimator.predict(lambda: deepfm.dataset(args.batch_size, args.eval_batches).map(lambda f, l: f),
                               yield_single_examples=False):
        pass
    result["predict_again_examples_per_sec"] = examples / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in estimator.predict(lambda: deepfm.dataset(args.batch_size, args.eval_batches).map(lambda f, l: f)):
        pass  # one dict per example, the call's default
    result["predict_single_again_examples_per_sec"] = examples / (time.perf_counter() - started)
    # Peak memory over the work every estimator contender does; the warm Predictor (elastimator's only) holds a
    # graph and session of its own on top, reported apart.
    result["peak_rss_mb"] = peak_rss_mb()
    if hasattr(estimator, "predictor"):
        result["warm_predict_examples_per_sec"] = _warm_predict_rate(estimator, receiver, args)
        result["peak_rss_with_warm_predictor_mb"] = peak_rss_mb()
    return result


def elastimator(args, model_dir):
    import elastimator as est

    return _estimator(est, args, model_dir)


def elastimator_unfused(args, model_dir):
    """elastimator with TensorFlow's own sparse Adam ops, to show what the fused updates are worth."""
    import elastimator as est

    return _estimator(est, args, model_dir, fuse_sparse_updates=False)


def elastimator_one_step(args, model_dir):
    """elastimator running one training step per session call (RunConfig(steps_per_execution=1)), the way
    tf.estimator does; the default sizes calls by pace, up to 20 steps each."""
    import elastimator as est

    return _estimator(est, args, model_dir, steps_per_execution=1)


def elastimator_own_hook(args, model_dir):
    """elastimator with default settings, timed by the program's own per-step hook (tf.estimator's contender is
    timed by the same hook): one step per session call, so the per-call cost shows (issue 51)."""
    import elastimator as est

    return _estimator(est, args, model_dir, own_hook=True)


def elastimator_mirrored(args, model_dir):
    """elastimator with RunConfig(train_distribute=eval_distribute=MirroredStrategy) over this process's one device:
    what a one-replica strategy costs (issue 46: nothing; within 5% of plain training)."""
    import tensorflow as tf

    import elastimator as est

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    return _estimator(est, args, model_dir, train_distribute=strategy, eval_distribute=strategy)


def tf_estimator(args, model_dir):
    import tensorflow as tf

    return _estimator(tf.estimator, args, model_dir)


def _keras_model():
    import keras
    import tensorflow as tf

    import deepfm

    class DeepFMLayer(keras.layers.Layer):
        def build(self, input_shape):
            normal = keras.initializers.RandomNormal(stddev=0.01, seed=1)
            rows = deepfm.NUM_SPARSE * deepfm.BUCKETS
            self.embeddings = self.add_weight(shape=(rows, deepfm.EMBEDDING), initializer=normal, name="embeddings")
            self.first_order = self.add_weight(shape=(rows, 1), initializer=normal, name="first_order")
            self.dense_weights = self.add_weight(shape=(deepfm.NUM_DENSE, 1), initializer=normal, name="dense_w")

        def call(self, dense, ids):
            ids = ids + tf.range(deepfm.NUM_SPARSE, dtype=tf.int64) * deepfm.BUCKETS
            embedded = tf.gather(self.embeddings, ids)
            linear = tf.reduce_sum(tf.gather(self.first_order, ids), axis=[1, 2]) + tf.squeeze(
                tf.matmul(dense, self.dense_weights), 1)
            summed = tf.reduce_sum(embedded, axis=1)
            fm = 0.5 * tf.reduce_sum(tf.square(summed) - tf.reduce_sum(tf.square(embedded), axis=1), axis=1)
            flat = tf.concat([tf.reshape(embedded, [-1, deepfm.NUM_SPARSE * deepfm.EMBEDDING]), dense], axis=1)
            return (linear + fm)[:, None], flat

    dense_in = keras.Input((deepfm.NUM_DENSE,), name="dense_features")
    ids_in = keras.Input((deepfm.NUM_SPARSE,), dtype="int64", name="ids_features")
    wide, hidden = DeepFMLayer(name="fm")(dense_in, ids_in)
    for i, units in enumerate(deepfm.HIDDEN):
        hidden = keras.layers.Dense(units, activation="relu", name=f"mlp_{i}")(hidden)
    logits = keras.layers.Add(name="logits")([wide, keras.layers.Dense(1, name="mlp_out")(hidden)])
    model = keras.Model({"dense": dense_in, "ids": ids_in}, logits)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=[keras.metrics.AUC(from_logits=True)])
    return model


def keras_fit(args, model_dir):
    import keras

    import deepfm

    clock = Clock(args.warmup)

    class Steps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            clock.step()

    model = _keras_model()
    clock.begin()
    model.fit(deepfm.dataset(args.batch_size, args.steps), epochs=1, callbacks=[Steps()], verbose=0)
    examples = args.eval_batches * args.batch_size
    eval_rate, predict_rate = _keras_verbs(model, args, examples)
    started = time.perf_counter()
    model.save_weights(os.path.join(model_dir, "model.weights.h5"))
    save_secs = time.perf_counter() - started
    started = time.perf_counter()
    model.export(os.path.join(model_dir, "export"), verbose=False)
    export_secs = time.perf_counter() - started
    started = time.perf_counter()
    model.fit(deepfm.dataset(args.batch_size, AGAIN_STEPS), epochs=1, verbose=0)
    train_again_secs = time.perf_counter() - started
    started = time.perf_counter()
    model.fit(deepfm.dataset(args.batch_size, AGAIN_STEPS), epochs=1, verbose=0)
    train_on_secs = time.perf_counter() - started
    eval_again, predict_again = _keras_verbs(model, args, examples)
    return {"train_examples_per_sec": clock.rate(args.batch_size), "time_to_first_step_secs": clock.first - clock.start,
            "train_again_secs": train_again_secs, "train_on_secs": train_on_secs, "checkpoint_save_secs": save_secs,
            "export_secs": export_secs,
            "eval_examples_per_sec": eval_rate, "predict_examples_per_sec": predict_rate,
            "eval_again_examples_per_sec": eval_again, "predict_again_examples_per_sec": predict_again}


def _keras_verbs(model, args, examples: int) -> tuple[float, float]:
    """Examples/s of a whole Keras `evaluate` and `predict` over the eval batches."""
    import deepfm

    started = time.perf_counter()
    model.evaluate(deepfm.dataset(args.batch_size, args.eval_batches), verbose=0)
    eval_rate = examples / (time.perf_counter() - started)
    started = time.perf_counter()
    model.predict(deepfm.dataset(args.batch_size, args.eval_batches).map(lambda f, l: f), verbose=0)
    return eval_rate, examples / (time.perf_counter() - started)


def tf_function(args, model_dir):
    import tensorflow as tf

    import deepfm

    clock = Clock(args.warmup)
    model = deepfm.DeepFM()
    train_step = deepfm.make_train_step(model, deepfm.optimizer())

    @tf.function
    def predict_step(features):
        return tf.sigmoid(model(features))

    clock.begin()
    for features, labels in deepfm.dataset(args.batch_size, args.steps):
        train_step(features, labels).numpy()
        clock.step()
    examples = args.eval_batches * args.batch_size
    eval_rate, predict_rate = _tf_function_verbs(predict_step, args, examples)
    started = time.perf_counter()
    tf.train.Checkpoint(model=model).save(os.path.join(model_dir, "ckpt"))
    save_secs = time.perf_counter() - started
    signature = predict_step.get_concrete_function({
        "dense": tf.TensorSpec([None, deepfm.NUM_DENSE], tf.float32),
        "ids": tf.TensorSpec([None, deepfm.NUM_SPARSE], tf.int64)})
    started = time.perf_counter()
    tf.saved_model.save(model, os.path.join(model_dir, "export"), signatures=signature)
    export_secs = time.perf_counter() - started
    started = time.perf_counter()
    for features, labels in deepfm.dataset(args.batch_size, AGAIN_STEPS):
        train_step(features, labels).numpy()
    train_again_secs = time.perf_counter() - started
    started = time.perf_counter()
    for features, labels in deepfm.dataset(args.batch_size, AGAIN_STEPS):
        train_step(features, labels).numpy()
    train_on_secs = time.perf_counter() - started
    eval_again, predict_again = _tf_function_verbs(predict_step, args, examples)
    return {"train_examples_per_sec": clock.rate(args.batch_size), "time_to_first_step_secs": clock.first - clock.start,
            "train_again_secs": train_again_secs, "train_on_secs": train_on_secs, "checkpoint_save_secs": save_secs,
            "export_secs": export_secs,
            "eval_examples_per_sec": eval_rate, "predict_examples_per_sec": predict_rate,
            "eval_again_examples_per_sec": eval_again, "predict_again_examples_per_sec": predict_again}


def _tf_function_verbs(predict_step, args, examples: int) -> tuple[float, float]:
    """Examples/s of an AUC over the eval batches and of predicting them, with a hand-written loop."""
    import tensorflow as tf

    import deepfm

    auc = tf.keras.metrics.AUC()
    started = time.perf_counter()
    for features, labels in deepfm.dataset(args.batch_size, args.eval_batches):
        auc.update_state(labels, predict_step(features))
    auc.result().numpy()
    eval_rate = examples / (time.perf_counter() - started)
    started = time.perf_counter()
    for features, _ in deepfm.dataset(args.batch_size, args.eval_batches):
        predict_step(features).numpy()
    return eval_rate, examples / (time.perf_counter() - started)


CONTENDERS = {"elastimator": elastimator, "elastimator_unfused": elastimator_unfused,
               "elastimator_one_step": elastimator_one_step, "elastimator_own_hook": elastimator_own_hook,
               "elastimator_mirrored": elastimator_mirrored,
               "tf_estimator": tf_estimator,
               "keras_fit": keras_fit, "tf_function": tf_function,
               # The default contender again, which frameworks.py --against REV runs with REV's src first on the path.
               "elastimator_before": elastimator}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(CONTENDERS))
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--eval-batches", type=int, default=50)
    args = parser.parse_args()
    import tensorflow as tf

    after_import = rss_mb()
    with tempfile.TemporaryDirectory() as model_dir:
        result = CONTENDERS[args.name](args, model_dir)
    result.setdefault("peak_rss_mb", peak_rss_mb())
    result.update(name=args.name, tensorflow=tf.__version__, rss_after_import_mb=after_import,
                  own_peak_rss_mb=result["peak_rss_mb"] - after_import)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
