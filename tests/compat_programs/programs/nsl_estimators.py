"""Neural Structured Learning's Estimator path (`nsl.estimator`'s documented functions): a custom estimator's
model_fn, trained with its own Adagrad, wrapped by `nsl.estimator.add_adversarial_regularization` and by
`nsl.estimator.add_graph_regularization` (neighbour features `NL_nbr_0_x` and weights `NL_nbr_0_weight` generated
beside each example, the embedding the model's hidden layer); each trains, evaluates and predicts. Both wrappers
call the base model_fn in TRAIN mode (the adversarial one three times) and return their own optimizer's train op
in place of the base model's. Prints `RESULT {json}`.
"""
import json
import sys

import numpy as np
import tensorflow as tf

import neural_structured_learning as nsl

rng = np.random.RandomState(0)
X = rng.normal(size=(256, 4)).astype("float32")
Y = (X[:, 0] - X[:, 1] + 0.5 * X[:, 2] > 0).astype("int64").reshape(-1, 1)
NEIGHBOURS = (X + 0.1 * rng.normal(size=X.shape)).astype("float32")  # a close example, as a graph would give


def _hidden(x):
    return tf.compat.v1.layers.dense(x, 8, activation=tf.nn.relu, name="hidden",
                                     kernel_initializer=tf.compat.v1.glorot_uniform_initializer(seed=3))


def model_fn(features, labels, mode, params):
    logits = tf.compat.v1.layers.dense(_hidden(features["x"]), 2, name="logits",
                                       kernel_initializer=tf.compat.v1.glorot_uniform_initializer(seed=4))
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes,
                                                             "probabilities": tf.nn.softmax(logits)})
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    metrics = {"accuracy": tf.compat.v1.metrics.accuracy(labels=labels, predictions=classes)}
    optimizer = tf.compat.v1.train.AdagradOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)


def embedding_fn(features, mode, params):
    del mode, params
    return _hidden(features["x"])


def input_fn(training, neighbours=False):
    def fn():
        features = {"x": X}
        if neighbours:
            features.update({"NL_nbr_0_x": NEIGHBOURS, "NL_nbr_0_weight": np.ones((len(X), 1), "float32")})
        dataset = tf.data.Dataset.from_tensor_slices((features, Y))
        return (dataset.shuffle(256, seed=1).repeat() if training else dataset).batch(32)
    return fn


def run(estimator, neighbours):
    estimator.train(input_fn(True, neighbours), steps=60)
    metrics = estimator.evaluate(input_fn(False))
    predictions = list(estimator.predict(input_fn(False)))
    values = {name: np.asarray(estimator.get_variable_value(name)) for name in estimator.get_variable_names()}
    return {
        "metrics": {k: float(v) for k, v in sorted(metrics.items())},
        "global_step": int(values["global_step"]),
        "variables": sorted(values),
        "abs_sums": {name: round(float(np.abs(v).sum()), 4) for name, v in sorted(values.items())},
        "prediction_keys": sorted(predictions[0]),
        "probabilities": [round(float(p["probabilities"][1]), 4) for p in predictions[:8]],
    }


def main(model_dir):
    def optimizer_fn():
        return tf.compat.v1.train.AdagradOptimizer(0.1)  # the base estimator's optimizer, as NSL's docs ask

    config = tf.estimator.RunConfig(tf_random_seed=7)
    params = {"learning_rate": 0.1}
    adversarial = nsl.estimator.add_adversarial_regularization(
        tf.estimator.Estimator(model_fn, model_dir=model_dir + "/adversarial", params=params, config=config),
        optimizer_fn=optimizer_fn,
        adv_config=nsl.configs.make_adv_reg_config(multiplier=0.2, adv_step_size=0.05))
    graph = nsl.estimator.add_graph_regularization(
        tf.estimator.Estimator(model_fn, model_dir=model_dir + "/graph", params=params, config=config),
        embedding_fn, optimizer_fn=optimizer_fn,
        graph_reg_config=nsl.configs.make_graph_reg_config(max_neighbors=1, multiplier=0.1))
    print("RESULT " + json.dumps({"adversarial": run(adversarial, False), "graph": run(graph, True)},
                                 sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
