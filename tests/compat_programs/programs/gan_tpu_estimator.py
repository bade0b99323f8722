"""TF-GAN's `TPUGANEstimator` on CPU (`use_tpu=False`, as its docstring and tests run it): a TPUEstimator whose
model_fn builds one GAN model per sub-step on a slice of each batch (a discriminator step then a generator step,
chained by control dependencies, then the global step), evaluates through `eval_metrics` (a metric function and
its tensors) with TF-GAN's default loss metrics and the user's, and predicts `generated_data`. Input functions take
their batch size from `params`. A generator learns to map noise to samples of N(3, 0.5). Prints `RESULT {json}`.
"""
import collections
import inspect
import json
import os
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


def generator_fn(noise, mode):
    del mode  # TF-GAN passes the mode to a network function that takes one
    hidden = tf.compat.v1.layers.dense(noise, 16, activation=tf.nn.relu)
    return tf.compat.v1.layers.dense(hidden, 1)


def discriminator_fn(data, unused_conditioning):
    hidden = tf.compat.v1.layers.dense(data, 16, activation=tf.nn.relu)
    return tf.compat.v1.layers.dense(hidden, 1)


def train_input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices((NOISE, REAL)).shuffle(1024, seed=1).repeat()
    return dataset.batch(params["batch_size"], drop_remainder=True)


def eval_input_fn(params):
    return tf.data.Dataset.from_tensor_slices((NOISE, REAL)).batch(params["batch_size"], drop_remainder=True)


def predict_input_fn(params):
    return tf.data.Dataset.from_tensor_slices(NOISE[:512]).batch(params["batch_size"], drop_remainder=True)


def eval_metrics(generator_inputs, generated_data, real_data, discriminator_real_outputs,
                 discriminator_gen_outputs):
    del generator_inputs, discriminator_real_outputs
    return {"generated_mean": tf.compat.v1.metrics.mean(generated_data),
            "real_mean": tf.compat.v1.metrics.mean(real_data),
            "discriminator_gen_mean": tf.compat.v1.metrics.mean(discriminator_gen_outputs)}


def main(model_dir):
    config = tf.compat.v1.estimator.tpu.RunConfig(model_dir=model_dir, tf_random_seed=3, save_checkpoints_steps=200)
    estimator = tfgan.estimator.TPUGANEstimator(
        generator_fn=generator_fn, discriminator_fn=discriminator_fn,
        generator_loss_fn=tfgan.losses.least_squares_generator_loss,
        discriminator_loss_fn=tfgan.losses.least_squares_discriminator_loss,
        generator_optimizer=tf.compat.v1.train.AdamOptimizer(0.005, 0.5),
        discriminator_optimizer=tf.compat.v1.train.AdamOptimizer(0.005, 0.5),
        get_eval_metric_ops_fn=eval_metrics, config=config, use_tpu=False,
        train_batch_size=64, eval_batch_size=256, predict_batch_size=128)
    estimator.train(train_input_fn, max_steps=600)
    metrics = estimator.evaluate(eval_input_fn, steps=4)
    predictions = list(estimator.predict(predict_input_fn))
    samples = np.array([p["generated_data"] for p in predictions]).reshape(-1)
    state = tf.train.get_checkpoint_state(model_dir)
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "prediction_keys": sorted(predictions[0]),
        "prediction_shape": list(np.shape(predictions[0]["generated_data"])),
        "sample_count": int(samples.size),
        "sample_mean": float(samples.mean()),
        "sample_std": float(samples.std()),
        "checkpoints": [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        "variables": sorted(estimator.get_variable_names()),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
