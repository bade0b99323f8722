"""The three modes a `model_fn` is called in."""

from __future__ import annotations


class ModeKeys:
    """Standard names for model modes, with tf.estimator's values.

    * `TRAIN`: training.
    * `EVAL`: evaluation.
    * `PREDICT`: inference (and SavedModel export).
    """

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"

    ALL = (TRAIN, EVAL, PREDICT)
