"""TF-GAN's `StarGANEstimator`, as its docstring and `examples/stargan_estimator` use it: one generator translates
an image to a target domain (given as a one-hot label), a discriminator judges real or generated and classifies the
domain, trained with `tfgan.stargan_loss` (Wasserstein losses with a gradient penalty, a reconstruction loss and a
domain classification loss) in sequential discriminator and generator steps (TF-GAN's hooks); evaluated with the
user's metrics beside TF-GAN's loss metrics; prediction through `stargan_prediction_input_fn_wrapper` (an input_fn
returning (images, target domains) as its features). 8x8 images of three domains, a bright band at the domain's
rows. Prints `RESULT {json}`.
"""
import collections
import inspect
import itertools
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

DOMAINS, SIZE = 3, 8
PATTERNS = -np.ones((DOMAINS, SIZE, SIZE, 1), "float32")
for _domain in range(DOMAINS):
    PATTERNS[_domain, 1 + 2 * _domain:3 + 2 * _domain] = 1.0
rng = np.random.RandomState(0)
DOMAIN = rng.randint(0, DOMAINS, size=512)
IMAGES = np.clip(PATTERNS[DOMAIN] + 0.2 * rng.normal(size=(512, SIZE, SIZE, 1)), -1, 1).astype("float32")
LABELS = np.eye(DOMAINS, dtype="float32")[DOMAIN]


def generator_fn(images, targets):
    tiled = tf.tile(targets[:, None, None, :], [1, SIZE, SIZE, 1])
    hidden = tf.compat.v1.layers.conv2d(tf.concat([images, tiled], 3), 16, 3, padding="same", activation=tf.nn.relu)
    hidden = tf.compat.v1.layers.conv2d(hidden, 16, 3, padding="same", activation=tf.nn.relu)
    return tf.compat.v1.layers.conv2d(hidden, 1, 3, padding="same", activation=tf.tanh)


def discriminator_fn(images, num_domains):
    hidden = tf.compat.v1.layers.conv2d(images, 16, 3, strides=2, padding="same", activation=tf.nn.leaky_relu)
    hidden = tf.compat.v1.layers.flatten(hidden)
    source = tf.squeeze(tf.compat.v1.layers.dense(hidden, 1), 1)
    return source, tf.compat.v1.layers.dense(hidden, num_domains)


def train_input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((IMAGES, LABELS)).shuffle(512, seed=1).repeat()
    return dataset.batch(16, drop_remainder=True)  # StarGAN needs fully defined shapes


def eval_input_fn():
    return tf.data.Dataset.from_tensor_slices((IMAGES, LABELS)).batch(64, drop_remainder=True)


def eval_metrics(model):
    def domain(labels):
        return tf.argmax(labels, 1)

    return {
        "real_domain_accuracy": tf.compat.v1.metrics.accuracy(
            domain(model.input_data_domain_label), domain(model.discriminator_input_data_domain_predication)),
        "generated_domain_accuracy": tf.compat.v1.metrics.accuracy(
            domain(model.generated_data_domain_target),
            domain(model.discriminator_generated_data_domain_predication)),
        "reconstruction_l1": tf.compat.v1.metrics.mean_absolute_error(model.input_data, model.reconstructed_data),
    }


def main(model_dir):
    tf.compat.v1.set_random_seed(3)
    estimator = tfgan.estimator.StarGANEstimator(
        model_dir=model_dir, generator_fn=generator_fn, discriminator_fn=discriminator_fn,
        loss_fn=tfgan.stargan_loss,
        generator_optimizer=tf.compat.v1.train.AdamOptimizer(0.002, beta1=0.5),
        discriminator_optimizer=tf.compat.v1.train.AdamOptimizer(0.002, beta1=0.5),
        get_hooks_fn=tfgan.get_sequential_train_hooks(tfgan.GANTrainSteps(1, 1)),
        get_eval_metric_ops_fn=eval_metrics,
        config=tf.estimator.RunConfig(tf_random_seed=3, save_checkpoints_steps=150))
    estimator.train(train_input_fn, max_steps=300)
    metrics = estimator.evaluate(eval_input_fn, steps=4)
    targets = np.arange(12) % DOMAINS  # each of the first 12 images to every domain in turn

    predict_input_fn = tfgan.estimator.stargan_prediction_input_fn_wrapper(
        lambda: (tf.constant(IMAGES[:12]), tf.one_hot(targets, DOMAINS)))
    # An input of tensors, not a dataset: predict yields forever, so take the 12 (as the example takes its rows).
    translated = np.stack(list(itertools.islice(estimator.predict(predict_input_fn), 12)))
    nearest = np.abs(translated[:, None] - PATTERNS[None]).mean(axis=(2, 3, 4)).argmin(axis=1)
    state = tf.train.get_checkpoint_state(model_dir)
    print("RESULT " + json.dumps({
        "metrics": {k: float(v) for k, v in metrics.items()},
        "prediction_shape": list(translated.shape),
        "translated_to_target": float((nearest == targets).mean()),  # nearest domain pattern is the target's
        "checkpoints": [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        "variables": sorted(name for name in estimator.get_variable_names() if "Adam" not in name),
    }, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])
