"""`tf.compat.v1.estimator.tpu.experimental`: the TPU embedding settings TPUEstimator took."""

from __future__ import annotations

from elastimator._records import record_type
from elastimator.errors import ConfigError

_FIELDS = ("feature_columns", "tensor_core_feature_columns", "optimization_parameters", "clipping_limit",
           "pipeline_execution_with_tensor_core", "experimental_gradient_multiplier_fn", "feature_to_config_dict",
           "table_to_config_dict", "partition_strategy", "profile_data_directory")


class EmbeddingConfigSpec(record_type("EmbeddingConfigSpec", _FIELDS)):
    """How a TPU laid out embedding tables (2.15's fields). Off a TPU nothing reads it: models read their
    embeddings through feature columns (or elastimator.embedding) as usual."""

    __slots__ = ()

    def __new__(cls, feature_columns=None, optimization_parameters=None, clipping_limit=None,
                pipeline_execution_with_tensor_core=False, experimental_gradient_multiplier_fn=None,
                feature_to_config_dict=None, table_to_config_dict=None, partition_strategy="div",
                profile_data_directory=None):
        if partition_strategy not in ("div", "mod"):
            raise ConfigError(f"EmbeddingConfigSpec: partition_strategy must be 'div' or 'mod'; got "
                              f"{partition_strategy!r}.")
        return super().__new__(cls, feature_columns, None, optimization_parameters, clipping_limit,
                               pipeline_execution_with_tensor_core, experimental_gradient_multiplier_fn,
                               feature_to_config_dict, table_to_config_dict, partition_strategy,
                               profile_data_directory)
