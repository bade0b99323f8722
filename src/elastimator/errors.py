"""Exception classes: one per failure area, all under `ElastimatorError`.

Each class also derives from the exception types tf.estimator 2.15 raised for
the same mistake, so code that caught those keeps working after the import line
changes: 2.15 raised `TypeError` for a value of the wrong type and `ValueError`
for a wrong value in the same area, so those classes derive from both.
`NanLossError` is TensorFlow's `NanLossDuringTrainingError`; it is defined on
first use, since this module must not load TensorFlow (the command line imports
it before any job runs).
"""

from __future__ import annotations


class ElastimatorError(Exception):
    """Base class of every error elastimator raises on purpose."""


class ConfigError(ElastimatorError, ValueError, TypeError):
    """A `RunConfig`, `TF_CONFIG` or spec argument is invalid."""


class ModelFnError(ElastimatorError, ValueError, TypeError):
    """A `model_fn` has the wrong signature or returned something unusable."""


class InputFnError(ElastimatorError, ValueError, TypeError):
    """An `input_fn` has the wrong signature or returned something unusable."""


class CheckpointError(ElastimatorError, ValueError):
    """A checkpoint is missing, unreadable, or does not match the model."""


class ModelDirError(ElastimatorError, ValueError):
    """The model directory cannot be used (e.g. it is a file)."""


class HeadError(ElastimatorError, ValueError):
    """Labels, logits or weights do not fit a head (wrong shape, class out of range, unknown label)."""


class ExportError(ElastimatorError, ValueError):
    """A SavedModel export was misconfigured or could not be written."""


class ClusterError(ElastimatorError, RuntimeError):
    """A cluster task cannot start, bind its port, or reach the tasks it needs."""


class ReaderError(ElastimatorError, ValueError):
    """Input data cannot be read: missing files, malformed records, a reader that fails."""


class MissingPathError(ReaderError):
    """A path a conf or the command line names (a data file, a SavedModel) does not exist: bad usage (`elastimator`
    exits 2), not a data failure."""


class ConfError(ElastimatorError, ValueError):
    """A job conf has an unknown key, a wrong type, or an inconsistent setting."""


def _nan_loss_error() -> type:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    class NanLossError(ElastimatorError, tf.compat.v1.train.NanLossDuringTrainingError):
        """Training produced a NaN or infinite loss and was stopped.

        It is a `tf.compat.v1.train.NanLossDuringTrainingError` (so `tf.estimator.NanLossDuringTrainingError`
        catches it, as it caught 2.15's), and a `RuntimeError`. The checkpoint written before the bad step is
        left untouched.
        """

        def __str__(self) -> str:  # TensorFlow's says only "NaN loss during training."
            return Exception.__str__(self)

    NanLossError.__module__ = __name__
    return NanLossError


def __getattr__(name: str):
    if name == "NanLossError":
        globals()[name] = _nan_loss_error()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


USAGE_EXIT = 2
"""`elastimator`'s exit code for an invalid conf or bad arguments (ConfError, ConfigError, MissingPathError)."""
REPEATING_EXIT = 3
"""`elastimator run`'s exit code for a failure a restart would repeat (a NaN loss, a reader past its
max_bad_records, a broken model_fn): `launch` ends the job on it instead of restarting the process."""
OUT_OF_RESTARTS_EXIT = 4
"""`elastimator run`'s exit code, in a Kubernetes pod, for a task restarted more times than its budget with no
progress between (cluster/pod_budget.py): 1-127, which the pods' restart policies treat as permanent."""
RETRY_EXIT = 138
"""`elastimator run`'s exit code, in a Kubernetes pod with a restart budget, for a failure a restart may cure
(every other error): 128 + SIGUSR1, the code the Kubeflow training operator sets apart for "restart me" (its
IsRetryableExitCode, pkg/util/train/train_util.go: 138 in the releases that list codes, and >= 128 in later ones)."""
