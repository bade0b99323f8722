"""Routing TF1 Keras APIs (`tf.compat.v1.layers`, `tf.keras`) to tf-keras.

TensorFlow resolves `tf.keras` and `tf.compat.v1.layers` lazily, on first
attribute access, from the `TF_USE_LEGACY_KERAS` environment variable. Estimator
programs were written against Keras 2 (`tf.compat.v1.layers.dense`,
`tf.keras.layers` in a graph), which only tf-keras still provides, so unless the
user chose otherwise we select it before anything touches those attributes.
`import keras` stays Keras 3 either way; the engine handles Keras 3 layers too.
"""

from __future__ import annotations

import os

ENV_VAR = "TF_USE_LEGACY_KERAS"


def tf_keras():
    """The `tf_keras` package, imported where a model or optimizer of it is used, not with elastimator."""
    import tf_keras  # pylint: disable=import-outside-toplevel

    return tf_keras


def prefer_tf_keras() -> None:
    """Selects tf-keras for tf.keras / tf.compat.v1.layers unless the user set TF_USE_LEGACY_KERAS."""
    os.environ.setdefault(ENV_VAR, "1")
