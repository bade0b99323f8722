"""`pandas_input_fn`: feed a DataFrame to an Estimator."""

from __future__ import annotations

from typing import Callable

import numpy as np

from elastimator.errors import InputFnError
from elastimator.inputs.numpy_io import arrays_input_fn


def pandas_input_fn(
    x,
    y=None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int = 1000,
    num_threads: int = 1,
    target_column: str = "target",
) -> Callable:
    """Returns an input_fn that feeds a `pandas.DataFrame` (features) and a Series or DataFrame (labels).

    Args:
        x: DataFrame; each column becomes a feature named after it.
        y: Series (one label tensor) or DataFrame (a dict of label tensors), or None.
            Its index must equal x's index.
        queue_capacity: Examples buffered ahead of the model; None: x's rows (four times them to shuffle).
        target_column: Must not be a column of x (the name tf.estimator reserved for y).
        Others: as in `numpy_input_fn`; features (and a DataFrame y's labels) keep the order of the columns.

    Raises:
        InputFnError: on index mismatch, a clashing target column, or a non-DataFrame x.
    """
    import pandas as pd  # pandas is only needed by users of this function

    if not isinstance(x, pd.DataFrame):
        raise InputFnError(f"pandas_input_fn: x must be a pandas.DataFrame; got {type(x).__name__}.")
    features = {str(c): _column(x[c]) for c in x.columns}
    labels = None
    if y is not None:
        if target_column in x.columns:
            raise InputFnError(
                f"pandas_input_fn: target_column {target_column!r} is already a column of x; "
                "pass another target_column."
            )
        if not isinstance(y, (pd.Series, pd.DataFrame)):
            raise InputFnError(f"pandas_input_fn: y must be a Series or DataFrame; got {type(y).__name__}.")
        if not np.array_equal(x.index.to_numpy(), y.index.to_numpy()):
            raise InputFnError(
                "pandas_input_fn: x and y have different indexes; align them (e.g. y = y.loc[x.index]) first."
            )
        labels = {str(c): _column(y[c]) for c in y.columns} if isinstance(y, pd.DataFrame) else _column(y)
    if queue_capacity is None:  # 2.15's queue then held the frame, or four times it to shuffle
        queue_capacity = len(x) * (4 if shuffle else 1)
    return arrays_input_fn(features, labels, batch_size, num_epochs, shuffle, queue_capacity, num_threads,
                           name="pandas_input_fn")


def _column(series) -> np.ndarray:
    values = series.to_numpy()
    return values.astype(object) if values.dtype.kind in "OUS" or str(series.dtype) == "string" else values
