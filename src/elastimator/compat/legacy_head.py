"""tf.estimator 1.x's `_Head` interface, for third-party code that subclasses it.

Libraries such as DeepCTR define their own heads on top of
`tensorflow.python.estimator.canned.head._Head`; they implement every method
themselves, so the interface is all that is needed. New code should use the heads in
`elastimator.premade`.
"""

from __future__ import annotations

import abc


class _Head(abc.ABC):  # pylint: disable=invalid-name  # tf.estimator's spelling, imported by name.
    """The v1 head contract: a name, a logits width, a loss, and an EstimatorSpec builder."""

    @property
    @abc.abstractmethod
    def name(self):
        """Head name, used to suffix metric keys; None for a single head."""

    @property
    @abc.abstractmethod
    def logits_dimension(self):
        """Size of the last dimension of the logits."""

    @abc.abstractmethod
    def create_loss(self, features, mode, logits, labels):
        """The loss (tf.estimator returned a LossSpec; subclasses may return what they use)."""

    @abc.abstractmethod
    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, train_op_fn=None,
                              regularization_losses=None):
        """An EstimatorSpec for `mode`."""
