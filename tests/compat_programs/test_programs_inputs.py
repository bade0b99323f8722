"""numpy_input_fn and pandas_input_fn make the steps tf.estimator 2.15 made, with the rows it gave each step:
programs/numpy_input_epochs.py run unedited under `python -m elastimator.compat`, compared with its run on
2.15 (reference_tf215.json). The program prints only what 2.15 itself gives alike on every run: in order, the
rows of each batch; shuffled, the steps, the batch sizes and how often each row came.
"""

from __future__ import annotations

import pytest

from tests.compat_programs.test_programs import REFERENCE, run_program

pytestmark = pytest.mark.integration


def test_input_fns_batch_across_epochs_as_2_15s_queues_did(tmp_path):
    got, reference = run_program("numpy_input_epochs", tmp_path), REFERENCE["numpy_input_epochs"]
    # The case first: 800 rows, batches of 64, two epochs are 25 steps (not 2 x 13), forty are 500.
    assert got["numpy_800_rows_batch_64_epochs_2_in_order"]["global_step"] == 25
    assert got["numpy_800_rows_batch_64_epochs_40_in_order"]["checkpoint"] == "500"
    assert sorted(got) == sorted(reference)
    for case, expected in reference.items():
        assert got[case] == expected, case
