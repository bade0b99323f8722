"""`elastimator.tpu`: TPUEstimator programs on CPU or GPU (`use_tpu=False`), as `tf.compat.v1.estimator.tpu`.

    estimator = elastimator.tpu.TPUEstimator(model_fn, config=elastimator.tpu.RunConfig(model_dir=...),
                                             use_tpu=False, train_batch_size=32)
"""

from elastimator.tpu import experimental
from elastimator.tpu.config import InputPipelineConfig, RunConfig, TPUConfig
from elastimator.tpu.estimator import TPUEstimator
from elastimator.tpu.spec import TPUEstimatorSpec

__all__ = ["InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec", "experimental"]
