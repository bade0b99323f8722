"""The canned estimators as `tf.compat.v1.estimator` had them: losses summed over the batch.

tf.estimator's v1 canned estimators (`tf.compat.v1.estimator.DNNClassifier`, ...)
defaulted to `loss_reduction=SUM`, where the TF2 ones (`tf.estimator.*`) average
over the batch; their optimizers, learning rates and layers were the same. A
migrated v1 program keeps its loss scale, and so its effective learning rate,
only with the v1 default. They also took variable partitioners
(`input_layer_partitioner`, `partitioner`), which spread a big layer over several
parameter servers; elastimator places each variable whole, so a partitioner is
accepted and logged, not applied.
"""

from __future__ import annotations

import logging

import tensorflow as tf

from elastimator.premade.baseline import BaselineClassifier, BaselineRegressor
from elastimator.premade.dnn import DNNClassifier, DNNRegressor
from elastimator.premade.linear import LinearClassifier, LinearRegressor
from elastimator.premade.wide_deep import DNNLinearCombinedClassifier, DNNLinearCombinedRegressor

logger = logging.getLogger("elastimator")

V1_LOSS_REDUCTION = tf.compat.v1.losses.Reduction.SUM
_PARTITIONER_ARGS = ("input_layer_partitioner", "partitioner")


def _v1(cls: type) -> type:
    """`cls` with the v1 default loss reduction, accepting (and not applying) the v1 partitioner arguments."""

    def __init__(self, *args, loss_reduction=V1_LOSS_REDUCTION, **kwargs):
        for name in _PARTITIONER_ARGS:
            if kwargs.pop(name, None) is not None:
                logger.info("%s: %s is accepted and not applied; each variable is placed whole.", cls.__name__, name)
        cls.__init__(self, *args, loss_reduction=loss_reduction, **kwargs)

    doc = f"`tf.compat.v1.estimator.{cls.__name__}`: `{cls.__name__}` with v1 defaults (see elastimator.premade.v1)."
    return type(cls.__name__, (cls,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


V1_CANNED = {cls.__name__: _v1(cls) for cls in (
    BaselineClassifier, BaselineRegressor, DNNClassifier, DNNRegressor, DNNLinearCombinedClassifier,
    DNNLinearCombinedRegressor, LinearClassifier, LinearRegressor)}
"""Name -> the v1-flavoured canned estimator, served as `tf.compat.v1.estimator.<name>`."""
