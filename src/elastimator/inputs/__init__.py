"""`elastimator.inputs`: input_fns over in-memory data, as `tf.estimator.inputs` had them, and datasets fed by
Python generators (`from_python`)."""

from elastimator.inputs.numpy_io import numpy_input_fn
from elastimator.inputs.pandas_io import pandas_input_fn
from elastimator.inputs.python_source import from_python

__all__ = ["from_python", "numpy_input_fn", "pandas_input_fn"]
