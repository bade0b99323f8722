"""TF-GAN's `GANEstimator`, as its docstring and tutorial use it: a generator learns to map noise to samples of
N(3, 0.5) against a discriminator, with least-squares GAN losses, sequential generator and
discriminator steps (TF-GAN's hooks), eval metrics of the generated samples, and prediction from noise. Prints
`RESULT {json}`.
"""
import collections
import inspect
import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_gan as tfgan

# A user fix TF-GAN 2.1.0 needs on any TensorFlow under Python 3.11 (not tf.estimator's): it calls
# inspect.getargspec, which Python 3.11 removed.
_ArgSpec = collections.namedtuple("ArgSpec", "args varargs keywords defaults")
inspect.getargspec = lambda fn: _ArgSpec(*inspect.getfullargspec(fn)[:4])

rng = np.random.RandomState(0)
REAL = (3.0 + 0.5 * rng.normal(size=(1024, 1))).astype("float32")
NOISE = rng.normal(size=(1024, 4)).astype("float32")


def generator_fn(noise):
    hidden = tf.compat.v1.layers.dense(noise, 16, activation=tf.nn.relu)
    return tf.compat.v1.layers.dense(hidden, 1)


def discriminator_fn(data, unused_conditioning):
    hidden = tf.compat.v1.layers.dense(data, 16, activation=tf.nn.relu)
    return tf.compat.v1.layers.dense(hidden, 1)


def train_input_fn():
    return tf.data.Dataset.from_tensor_slices((NOISE, REAL)).shuffle(1024, seed=1).repeat().batch(64)


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((NOISE, REAL)).batch(256)


def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices(NOISE[:512]).batch(128)


def eval_metrics(gan_model):
    generated = gan_model.generated_data
    return {"generated_mean": tf.compat.v1.metrics.mean(generated),
            "real_mean": tf.compat.v1.metrics.mean(gan_model.real_data)}


def main(model_dir):
    tf.compat.v1.set_random_seed(3)
    estimator = tfgan.estimator.GANEstimator(
        model_dir=model_dir, generator_fn=generator_fn, discriminator_fn=discriminator_fn,
        generator_loss_fn=tfgan.losses.least_squares_generator_loss,
        discriminator_loss_fn=tfgan.losses.least_squares_discriminator_loss,
        generator_optimizer=tf.compat.v1.train.AdamOptimizer(0.005, 0.5),
        discriminator_optimizer=tf.compat.v1.train.AdamOptimizer(0.005, 0.5),
        get_eval_metric_ops_fn=eval_metrics,
        config=tf.estimator.RunConfig(tf_random_seed=3))
    estimator.train(train_input_fn, max_steps=600)
    metrics = estimator.evaluate(eval_input_fn)
    samples = np.concatenate([np.asarray(p).reshape(-1) for p in estimator.predict(predict_input_fn)])
    print("RESULT " + json.dumps({
        "metric_keys": sorted(metrics),
        "global_step": int(metrics["global_step"]),
        "generated_mean": float(metrics["generated_mean"]),
        "real_mean": float(metrics["real_mean"]),
        "sample_count": int(samples.size),
        "sample_mean": float(samples.mean()),
        "sample_std": float(samples.std()),
        "variables": sorted(name for name in estimator.get_variable_names() if "Adam" not in name),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
