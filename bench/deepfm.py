"""A DeepFM-like CTR model and its synthetic data, shared by the benchmarks.

13 dense + 26 hashed categorical features, embedding 8, FM + MLP 64-32, Adam.
The data is generated inside tf.data from stateless random ops keyed by the
batch index, so every contender sees identical batches and no data set is
embedded in a graph.
"""

from __future__ import annotations

import tensorflow as tf

NUM_DENSE, NUM_SPARSE, BUCKETS, EMBEDDING = 13, 26, 10_000, 8
HIDDEN = (64, 32)


def make_batch(index: tf.Tensor, batch_size: int):
    seed = tf.stack([tf.cast(index, tf.int64), tf.constant(7, tf.int64)])
    dense = tf.random.stateless_uniform([batch_size, NUM_DENSE], seed=seed)
    ids = tf.random.stateless_uniform([batch_size, NUM_SPARSE], seed=seed + 1, maxval=BUCKETS, dtype=tf.int64)
    # A learnable label: clicks depend on a few dense values and id parities.
    score = tf.reduce_sum(dense[:, :4], axis=1) - 2.0 + tf.cast(ids[:, 0] % 2, tf.float32)
    labels = tf.cast(score > 0.5, tf.float32)[:, None]
    return {"dense": dense, "ids": ids}, labels


def dataset(batch_size: int, num_batches: int | None = None) -> tf.data.Dataset:
    indices = tf.data.Dataset.range(num_batches) if num_batches else tf.data.Dataset.range(2**62)
    return indices.map(lambda i: make_batch(i, batch_size), num_parallel_calls=tf.data.AUTOTUNE).prefetch(4)


class DeepFM(tf.Module):
    """The model's variables and forward pass, usable in a v1 graph or under tf.function."""

    def __init__(self):
        super().__init__()
        init = tf.random_normal_initializer(stddev=0.01, seed=1)
        self.embeddings = tf.Variable(init([NUM_SPARSE * BUCKETS, EMBEDDING]), name="embeddings")
        self.first_order = tf.Variable(init([NUM_SPARSE * BUCKETS, 1]), name="first_order")
        self.dense_weights = tf.Variable(init([NUM_DENSE, 1]), name="dense_weights")
        sizes = (NUM_SPARSE * EMBEDDING + NUM_DENSE,) + HIDDEN + (1,)
        glorot = tf.compat.v1.glorot_uniform_initializer(seed=2)  # TF core: no Keras import in any contender
        self.kernels = [tf.Variable(glorot([a, b]), name=f"kernel_{i}") for i, (a, b) in
                        enumerate(zip(sizes[:-1], sizes[1:]))]
        self.biases = [tf.Variable(tf.zeros([b]), name=f"bias_{i}") for i, b in enumerate(sizes[1:])]

    def __call__(self, features) -> tf.Tensor:
        offsets = tf.range(NUM_SPARSE, dtype=tf.int64) * BUCKETS
        ids = features["ids"] + offsets
        embedded = tf.nn.embedding_lookup(self.embeddings, ids)  # [batch, 26, 8]
        linear = tf.reduce_sum(tf.nn.embedding_lookup(self.first_order, ids), axis=[1, 2])
        linear += tf.squeeze(tf.matmul(features["dense"], self.dense_weights), 1)
        summed = tf.reduce_sum(embedded, axis=1)
        fm = 0.5 * tf.reduce_sum(tf.square(summed) - tf.reduce_sum(tf.square(embedded), axis=1), axis=1)
        hidden = tf.concat([tf.reshape(embedded, [-1, NUM_SPARSE * EMBEDDING]), features["dense"]], axis=1)
        for i, (kernel, bias) in enumerate(zip(self.kernels, self.biases)):
            hidden = tf.matmul(hidden, kernel) + bias
            if i < len(self.kernels) - 1:
                hidden = tf.nn.relu(hidden)
        return (linear + fm + tf.squeeze(hidden, 1))[:, None]


def loss_fn(logits, labels) -> tf.Tensor:
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))


def optimizer(learning_rate: float = 1e-3):
    """The same optimizer for every contender (v1 Adam runs in graphs and in tf.function)."""
    return tf.compat.v1.train.AdamOptimizer(learning_rate)


def make_train_step(model: DeepFM, opt):
    """The hand-written TF2 training step: a tf.function over GradientTape and the optimizer."""
    variables = model.trainable_variables

    @tf.function
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(model(features), labels)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return train_step


def make_model_fn(est):
    """The Estimator model_fn over the same model, for `est` = elastimator or tf.estimator. Its modes in the order
    the tf.estimator guide and the user's own notes (shared/seeds/004) write them: PREDICT returns first, EVAL
    next, so only TRAIN builds the optimizer."""

    def model_fn(features, labels, mode):
        logits = DeepFM()(features)
        if mode == est.ModeKeys.PREDICT:
            return est.EstimatorSpec(mode, predictions={"probability": tf.sigmoid(logits)})
        loss = loss_fn(logits, labels)
        if mode == est.ModeKeys.EVAL:
            auc = tf.compat.v1.metrics.auc(labels, tf.sigmoid(logits))
            return est.EstimatorSpec(mode, loss=loss, eval_metric_ops={"auc": auc})
        train_op = optimizer().minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def criteo_model_fn(features, labels, mode):
    """The same DeepFM over the raw Criteo columns (examples/criteo): log of the counts, hashed categories."""
    import elastimator as est

    dense = tf.math.log1p(tf.cast(tf.stack([features[f"I{i}"] for i in range(1, 14)], axis=1), tf.float32))
    ids = tf.strings.to_hash_bucket_fast(tf.stack([features[f"C{i}"] for i in range(1, 27)], axis=1), BUCKETS)
    if labels is not None:  # (serving has none)
        labels = tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)
    return make_model_fn(est)({"dense": dense, "ids": ids}, labels, mode)
