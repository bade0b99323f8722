"""Trains one model with and without `train_distribute` over two logical CPUs of this process; prints what a test
compares as one JSON line: each run's losses per step, final weights, the metrics of evaluating each model
without the strategy, and those of evaluating the replicas' model over the replicas (eval_distribute).

Usage: python replicas_program.py KIND WORK_DIR [STRATEGY]
  KIND      custom (a model_fn with a v1 optimizer) | canned (LinearRegressor, a tf-keras optimizer) |
            canned_v1 (tf.compat.v1.estimator.LinearRegressor: losses summed, no scaling) |
            refusals (what training over the replicas refuses, and the messages) |
            heads (every canned head and a MultiHead: evaluated over the replicas and on one device, predicted,
            exported)
  STRATEGY  mirrored (default cross-device ops) | mirrored_v1 (tf.compat.v1.distribute) | central_storage

The strategy's run takes batches of 4 per replica (8 per step); the plain run takes batches of 8 of the same
records in the same order. The logical devices must be made before TensorFlow starts: hence a process of its own.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0],
                                           [tf.config.LogicalDeviceConfiguration()] * 2)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import elastimator as est  # noqa: E402
from tests.helpers import read_events, regression_model_fn  # noqa: E402

PER_REPLICA = 4
STEPS = 12
RNG = np.random.default_rng(0)
X = RNG.normal(size=(PER_REPLICA * 2 * STEPS, 3)).astype(np.float32)
Y = (X @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)


CONTEXTS = []
"""What each input_fn call was given as its input_context."""


def input_fn_of(batch_size):
    def input_fn(input_context=None):
        CONTEXTS.append(None if input_context is None else [
            input_context.num_replicas_in_sync, input_context.input_pipeline_id, input_context.num_input_pipelines])
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(batch_size)
    return input_fn


def estimator_of(kind, model_dir, strategy, eval_strategy=None):
    config = est.RunConfig(train_distribute=strategy, eval_distribute=eval_strategy, tf_random_seed=1,
                           save_summary_steps=1,
                           log_step_count_steps=None, save_checkpoints_steps=STEPS)
    column = [tf.feature_column.numeric_column("x", shape=(3,))]
    if kind == "custom":
        return est.Estimator(regression_model_fn, model_dir=model_dir, config=config)
    if kind == "canned":
        return est.LinearRegressor(column, model_dir=model_dir, config=config, optimizer="SGD")
    from elastimator.premade import v1  # tf.compat.v1.estimator's canned estimators

    return v1.LinearRegressor(
        column, model_dir=model_dir, config=config, optimizer=tf.compat.v1.train.GradientDescentOptimizer(0.01))


def weights_of(estimator):
    return {name: estimator.get_variable_value(name).ravel().tolist() for name in estimator.get_variable_names()
            if "global_step" not in name and "Ftrl" not in name and "/part_" not in name}


def refusals(work_dir, strategy):
    """What the replicas' training refuses, each with its message."""
    said = {}

    def tensors_input_fn():
        return {"x": tf.constant(X[:4])}, tf.constant(Y[:4])

    def embedding_model_fn(features, labels, mode):
        from elastimator.embedding.variable import get_embedding_variable  # DeepRec's tf.get_embedding_variable

        table = get_embedding_variable("ids", embedding_dim=2)
        rows = tf.nn.embedding_lookup(table, tf.cast(features["x"][:, 0] > 0, tf.int64))
        return regression_model_fn({"x": features["x"] + tf.reduce_sum(rows)}, labels, mode)

    cases = {
        "input_fn_not_a_dataset": (regression_model_fn, tensors_input_fn, {}),
        "embedding_variables": (embedding_model_fn, input_fn_of(PER_REPLICA), {}),
        "steps_per_execution": (regression_model_fn, input_fn_of(PER_REPLICA), {"steps_per_execution": 4}),
    }
    for name, (fn, input_fn, extra) in cases.items():
        config = est.RunConfig(train_distribute=strategy, **extra)
        try:
            est.Estimator(fn, model_dir=os.path.join(work_dir, name), config=config).train(input_fn, max_steps=2)
            said[name] = None
        except est.ElastimatorError as e:
            said[name] = [type(e).__name__, str(e)]
    return said


HEAD_LABELS = {
    "binary": (X[:, :1] > 0).astype(np.int64),
    "multi_class": np.digitize(X[:, :1], [-0.5, 0.5]).astype(np.int64),
    "multi_label": (X[:, :2] > 0).astype(np.int64),
    "regression": Y,
    "poisson": np.round(np.exp(0.5 * X[:, :1])).astype(np.float32),
    "logistic": ((X[:, :1] > 0) * 0.8 + 0.1).astype(np.float32),
}


def _head(name):
    return {"binary": lambda: est.BinaryClassHead(), "multi_class": lambda: est.MultiClassHead(3),
            "multi_label": lambda: est.MultiLabelHead(2), "regression": lambda: est.RegressionHead(),
            "poisson": lambda: est.PoissonRegressionHead(), "logistic": lambda: est.LogisticRegressionHead(),
            "multi_head": lambda: est.MultiHead([est.BinaryClassHead(name="click"),
                                                 est.RegressionHead(name="value")])}[name]()


def heads(work_dir, strategy):
    """Every canned head (and a MultiHead): trained over the replicas, evaluated over them and on one device on
    the same batches, then predicting and exported."""
    column = [tf.feature_column.numeric_column("x", shape=(3,))]
    said = {}
    for name in (*HEAD_LABELS, "multi_head"):
        labels = {"click": HEAD_LABELS["binary"], "value": Y} if name == "multi_head" else HEAD_LABELS[name]

        def input_fn(batch, labels=labels):
            return lambda: tf.data.Dataset.from_tensor_slices(({"x": X}, labels)).batch(batch)

        def estimator(train=None, evaluate=None, name=name):
            config = est.RunConfig(train_distribute=train, eval_distribute=evaluate, tf_random_seed=1,
                                   log_step_count_steps=None, save_checkpoints_steps=STEPS)
            return est.DNNEstimator(_head(name), [8], column, model_dir=os.path.join(work_dir, name), config=config,
                                    optimizer="Adagrad")

        estimator(train=strategy).train(input_fn(PER_REPLICA), max_steps=STEPS)
        over = estimator(evaluate=strategy).evaluate(input_fn(PER_REPLICA), steps=STEPS, name="replicas")
        one = estimator().evaluate(input_fn(PER_REPLICA), steps=2 * STEPS, name="one_device")
        prediction = next(iter(estimator().predict(input_fn(PER_REPLICA))))
        receiver = est.export.build_raw_serving_input_receiver_fn({"x": tf.constant(X[:1])})
        exported = estimator().export_saved_model(os.path.join(work_dir, name, "export"), receiver)
        said[name] = {"over_replicas": {k: float(v) for k, v in over.items()},
                      "one_device": {k: float(v) for k, v in one.items()},
                      "prediction_keys": sorted(map(str, prediction)),
                      "exported": os.path.exists(os.path.join(exported.decode(), "saved_model.pb"))}
    return said


def main(kind, work_dir, strategy_name="mirrored"):
    devices = ["/cpu:0", "/cpu:1"]
    strategy = {"mirrored": lambda: tf.distribute.MirroredStrategy(devices),
                "mirrored_v1": lambda: tf.compat.v1.distribute.MirroredStrategy(devices),
                "central_storage": lambda: tf.distribute.experimental.CentralStorageStrategy(devices)}[strategy_name]()
    result = {"replica_count": strategy.num_replicas_in_sync}
    if kind == "refusals":
        print("RESULT " + json.dumps(refusals(work_dir, strategy)), flush=True)
        return
    if kind == "heads":
        print("RESULT " + json.dumps(heads(work_dir, strategy)), flush=True)
        return
    for name, run_strategy, batch in (("plain", None, PER_REPLICA * 2), ("replicas", strategy, PER_REPLICA)):
        estimator = estimator_of(kind, os.path.join(work_dir, name), run_strategy)
        estimator.train(input_fn_of(batch), max_steps=STEPS)
        # Evaluated without the strategy: the checkpoint the replicas wrote restores into a plain graph.
        plain = estimator_of(kind, os.path.join(work_dir, name), None)
        evaluation = plain.evaluate(input_fn_of(PER_REPLICA * 2), steps=STEPS)
        losses = [loss for _, loss in read_events(estimator.model_dir)["loss"]]
        result[name] = {"losses": losses, "weights": weights_of(plain),
                        "eval_loss": float(evaluation["loss"]), "global_step": int(evaluation["global_step"]),
                        "metrics": {k: float(v) for k, v in evaluation.items()}}
    # The replicas' model evaluated over the replicas, each taking batches of 4 (steps of 8 records), and on one
    # device in batches of 4: the same records, the same batches (a v1 canned loss is a sum over its batch).
    model_dir = os.path.join(work_dir, "replicas")
    evaluation = estimator_of(kind, model_dir, None, strategy).evaluate(input_fn_of(PER_REPLICA), steps=STEPS,
                                                                        name="replicas")
    result["eval_over_replicas"] = {k: float(v) for k, v in evaluation.items()}
    evaluation = estimator_of(kind, model_dir, None).evaluate(input_fn_of(PER_REPLICA), steps=2 * STEPS,
                                                              name="one_device")
    result["eval_one_device"] = {k: float(v) for k, v in evaluation.items()}
    result["input_contexts"] = CONTEXTS
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
