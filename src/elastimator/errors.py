"""Exception classes: one per failure area, all under `ElastimatorError`.

Each class also derives from the built-in exception that tf.estimator raised
for the same mistake (mostly `ValueError`), so code that caught those keeps
working after the import line changes.
"""

from __future__ import annotations


class ElastimatorError(Exception):
    """Base class of every error elastimator raises on purpose."""


class ConfigError(ElastimatorError, ValueError):
    """A `RunConfig`, `TF_CONFIG` or spec argument is invalid."""


class ModelFnError(ElastimatorError, ValueError):
    """A `model_fn` has the wrong signature or returned something unusable."""


class InputFnError(ElastimatorError, ValueError):
    """An `input_fn` has the wrong signature or returned something unusable."""


class CheckpointError(ElastimatorError, ValueError):
    """A checkpoint is missing, unreadable, or does not match the model."""


class ModelDirError(ElastimatorError, ValueError):
    """The model directory cannot be used (e.g. it is a file)."""


class NanLossError(ElastimatorError, RuntimeError):
    """Training produced a NaN or infinite loss and was stopped.

    The checkpoint written before the bad step is left untouched.
    """


class HeadError(ElastimatorError, ValueError):
    """Labels, logits or weights do not fit a head (wrong shape, class out of range, unknown label)."""


class ExportError(ElastimatorError, ValueError):
    """A SavedModel export was misconfigured or could not be written."""


class ClusterError(ElastimatorError, RuntimeError):
    """A cluster task cannot start, bind its port, or reach the tasks it needs."""


class ReaderError(ElastimatorError, ValueError):
    """Input data cannot be read: missing files, malformed records, a reader that fails."""


class ConfError(ElastimatorError, ValueError):
    """A job conf has an unknown key, a wrong type, or an inconsistent setting."""


USAGE_EXIT = 2
"""`elastimator run`'s exit code for an invalid conf or bad arguments (ConfError, ConfigError)."""
REPEATING_EXIT = 3
"""`elastimator run`'s exit code for a failure a restart would repeat (a NaN loss, a reader past its
max_bad_records, a broken model_fn): `launch` ends the job on it instead of restarting the process."""
