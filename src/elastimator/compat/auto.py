"""`import elastimator.compat.auto` installs the tf.estimator compatibility layer (see `elastimator.compat`)."""

from elastimator.compat import install

install()
