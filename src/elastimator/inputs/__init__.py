"""`elastimator.inputs`: input_fns over in-memory data, as `tf.estimator.inputs` had them."""

from elastimator.inputs.numpy_io import numpy_input_fn
from elastimator.inputs.pandas_io import pandas_input_fn

__all__ = ["numpy_input_fn", "pandas_input_fn"]
