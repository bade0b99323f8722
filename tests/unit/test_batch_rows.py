"""batch_rows: the rows of each batch of numpy_input_fn and pandas_input_fn, as tf.estimator 2.15's queues
batched them (values recorded from 2.15 in tests/compat_programs/reference_tf215.json, numpy_input_epochs)."""

import numpy as np
import pytest

from elastimator.inputs.batch_rows import batch_rows


def _rows(*args, **kwargs):
    return [batch.tolist() for batch in batch_rows(*args, **kwargs)]


@pytest.mark.parametrize("rows, batch_size, num_epochs, steps, last", [
    (800, 64, 1, 13, 32), (800, 64, 2, 25, 64), (800, 64, 40, 500, 64), (10, 4, 3, 8, 2), (3, 128, 5, 1, 15),
])
def test_batches_run_on_across_epochs_and_only_the_last_is_smaller(rows, batch_size, num_epochs, steps, last):
    for shuffle in (False, True):
        batches = _rows(rows, batch_size, num_epochs, shuffle, seed=1)
        assert len(batches) == steps and len(batches[-1]) == last
        assert {len(b) for b in batches[:-1]} <= {batch_size}
        counts = np.bincount(np.concatenate(batches), minlength=rows)
        assert set(counts.tolist()) == {num_epochs}


def test_in_order_rows_as_2_15_gave_them():
    assert _rows(10, 4, 3, False) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9],
                                      [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_forever_every_batch_is_full():
    batches = batch_rows(10, 4, None, False)
    assert [next(batches).tolist() for _ in range(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    shuffled = batch_rows(3, 4, None, True, seed=0)
    assert all(len(next(shuffled)) == 4 for _ in range(50))


def test_shuffled_epochs_each_visit_every_row_once_and_follow_the_seed():
    batches = _rows(10, 5, 2, True, seed=7)
    assert sorted(batches[0] + batches[1]) == sorted(batches[2] + batches[3]) == list(range(10))
    assert batches == _rows(10, 5, 2, True, seed=7) and batches != _rows(10, 5, 2, True, seed=8)


def test_each_reader_reads_every_epoch_and_their_chunks_come_in_turn():
    # 2.15's two threads each enqueued [0..3], [4..7], [8, 9]; one order their chunks could reach the queue in.
    assert _rows(10, 4, 1, False, readers=2) == [[0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7], [4, 5, 6, 7],
                                                 [8, 9, 8, 9]]
    shuffled = np.concatenate(_rows(10, 4, 2, True, readers=3, seed=2))
    assert sorted(shuffled.tolist()) == sorted(list(range(10)) * 6)
