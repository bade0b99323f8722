"""The one integer check every config and request field uses."""

import numpy as np
import pytest

from elastimator._validate import is_int


@pytest.mark.parametrize("value, minimum, expected", [
    (3, None, True), (np.int64(3), 1, True), (0, 0, True), (0, 1, False),
    (True, None, False), (np.bool_(True), None, False), (3.0, None, False), ("3", None, False), (None, 0, False),
])
def test_an_int_is_an_integer_that_is_not_a_bool(value, minimum, expected):
    assert is_int(value, minimum) is expected
