"""numpy_input_fn and pandas_input_fn: batches, epochs, shuffling and errors."""

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import InputFnError


def _batches(input_fn):
    dataset = input_fn()
    assert isinstance(dataset, tf.data.Dataset)
    return list(dataset.as_numpy_iterator())


def test_numpy_batches_run_on_across_epochs():
    x = {"a": np.arange(10, dtype=np.float32), "b": np.arange(10, dtype=np.int64) * 2}
    batches = _batches(est.inputs.numpy_input_fn(x, np.arange(10), batch_size=4, num_epochs=3, shuffle=False))
    # tf.estimator 2.15's queue: 8 steps, full batches across the epochs' ends, the last one of 2
    # (tests/compat_programs/reference_tf215.json, numpy_10_rows_batch_4_epochs_3), not 3 x (4, 4, 2).
    assert [len(features["a"]) for features, _ in batches] == [4, 4, 4, 4, 4, 4, 4, 2]
    features, labels = batches[2]
    assert features["a"].tolist() == [8, 9, 0, 1] and features["b"].tolist() == [16, 18, 0, 2]
    assert labels.tolist() == [8, 9, 0, 1]


def test_numpy_forever_batches_are_full_and_of_static_size():
    dataset = est.inputs.numpy_input_fn({"x": np.arange(10)}, np.arange(10), batch_size=4, num_epochs=None,
                                        shuffle=False)()
    features, labels = dataset.element_spec
    assert features["x"].shape.as_list() == [4] and labels.shape.as_list() == [4]
    rows = [f["x"].tolist() for f, _ in dataset.take(4).as_numpy_iterator()]
    assert rows == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    counted = est.inputs.numpy_input_fn({"x": np.arange(10)}, batch_size=4, num_epochs=1, shuffle=False)()
    assert counted.element_spec["x"].shape.as_list() == [None]


def test_numpy_dicts_come_in_the_order_of_their_keys_and_frames_in_the_order_of_their_columns():
    x = {"row": np.arange(3), "b": np.arange(3), "a": np.arange(3)}
    (features, labels), = _batches(est.inputs.numpy_input_fn(x, {"u": np.arange(3), "t": np.arange(3)},
                                                             shuffle=False))
    assert list(features) == ["a", "b", "row"] and list(labels) == ["t", "u"]  # as 2.15 sorted them
    frame = pd.DataFrame(x)
    (features, labels), = _batches(est.inputs.pandas_input_fn(frame, pd.DataFrame({"u": [1, 2, 3], "t": [1, 2, 3]}),
                                                              shuffle=False, queue_capacity=None))
    assert list(features) == ["row", "b", "a"] and list(labels) == ["u", "t"]


def test_numpy_threads_each_read_every_epoch_as_2_15s_did(caplog):
    input_fn = est.inputs.numpy_input_fn({"x": np.arange(10)}, batch_size=4, num_epochs=1, shuffle=False,
                                         num_threads=2)
    assert "reads the data 2 times" in caplog.text
    rows = np.concatenate([b["x"] for b in _batches(input_fn)])
    assert sorted(rows.tolist()) == sorted(list(range(10)) * 2)  # 5 steps, each row twice (2.15: the same)


def test_numpy_shuffle_keeps_rows_together_and_covers_every_row():
    x = np.arange(100, dtype=np.float32)
    batches = _batches(est.inputs.numpy_input_fn({"x": x}, x.astype(np.int64) * 10, batch_size=32, shuffle=True))
    seen = np.concatenate([f["x"] for f, _ in batches])
    assert sorted(seen.tolist()) == x.tolist() and seen.tolist() != x.tolist()
    for features, labels in batches:
        assert (features["x"].astype(np.int64) * 10 == labels).all()


def test_numpy_single_array_and_no_labels_and_strings():
    batches = _batches(est.inputs.numpy_input_fn(np.ones([5, 3], np.float32), batch_size=2, shuffle=False))
    assert [b.shape for b in batches] == [(2, 3), (2, 3), (1, 3)]
    words = _batches(est.inputs.numpy_input_fn({"w": np.array(["a", "bc"])}, batch_size=2, shuffle=False))
    assert words[0]["w"].tolist() == [b"a", b"bc"]


def test_numpy_repeats_forever_when_num_epochs_is_none():
    dataset = est.inputs.numpy_input_fn({"x": np.arange(3)}, batch_size=2, num_epochs=None, shuffle=False)()
    assert len(list(dataset.take(10).as_numpy_iterator())) == 10


@pytest.mark.parametrize("kwargs, message", [
    (dict(x={"x": np.ones(3)}), "shuffle must be True or False, set explicitly"),
    (dict(x={"x": np.ones(3)}, y=np.ones(4), shuffle=False), "x has 3 rows but y has 4"),
    (dict(x={"a": np.ones(3), "b": np.ones(2)}, shuffle=False), "same length"),
    (dict(x={"x": np.ones(3)}, y={"x": np.ones(3)}, shuffle=False), r"keys \['x'\] are in both x and y"),
    (dict(x={"x": np.ones(3)}, batch_size=0, shuffle=False), "batch_size must be a positive int"),
    (dict(x={"x": np.ones(3)}, num_epochs=0, shuffle=False), "num_epochs must be a positive int or None"),
    (dict(x={"x": np.ones(3)}, num_threads=0, shuffle=False), "num_threads must be a positive int; got 0"),
    (dict(x={"x": np.ones(0)}, shuffle=False), "x has no rows"),
])
def test_numpy_input_errors(kwargs, message):
    with pytest.raises(InputFnError, match=message):
        est.inputs.numpy_input_fn(**kwargs)


def test_pandas_frame_and_series():
    frame = pd.DataFrame({"age": [20.0, 30.0, 40.0], "city": ["a", "b", "c"]}, index=[7, 8, 9])
    target = pd.Series([0, 1, 0], index=[7, 8, 9])
    (features, labels), = _batches(est.inputs.pandas_input_fn(frame, target, batch_size=8, shuffle=False))
    assert features["age"].tolist() == [20.0, 30.0, 40.0] and features["city"].tolist() == [b"a", b"b", b"c"]
    assert labels.tolist() == [0, 1, 0]


def test_pandas_errors():
    frame = pd.DataFrame({"a": [1, 2], "target": [0, 1]})
    with pytest.raises(InputFnError, match="different indexes"):
        est.inputs.pandas_input_fn(frame[["a"]], pd.Series([0, 1], index=[5, 6]), shuffle=False)
    with pytest.raises(InputFnError, match="target_column 'target' is already a column of x"):
        est.inputs.pandas_input_fn(frame, pd.Series([0, 1]), shuffle=False)
    with pytest.raises(InputFnError, match="x must be a pandas.DataFrame"):
        est.inputs.pandas_input_fn({"a": [1]}, shuffle=False)


def test_pandas_input_trains_an_estimator(tmp_path, iris):
    from tests.helpers import linear_model_fn

    x, y = iris
    frame = pd.DataFrame(x, columns=["a", "b", "c", "d"])

    def model_fn(features, labels, mode):
        stacked = tf.stack([tf.cast(features[c], tf.float32) for c in "abcd"], axis=1)
        return linear_model_fn({"x": stacked}, labels, mode, {})

    estimator = est.Estimator(model_fn, model_dir=str(tmp_path), config=est.RunConfig(tf_random_seed=7))
    estimator.train(est.inputs.pandas_input_fn(frame, pd.Series(y), num_epochs=None, shuffle=True), steps=150)
    metrics = estimator.evaluate(est.inputs.pandas_input_fn(frame, pd.Series(y), shuffle=False))
    assert metrics["accuracy"] > 0.85


def test_numpy_input_fn_shuffle_follows_the_graph_seed():
    input_fn = est.inputs.numpy_input_fn({"x": np.arange(100)}, batch_size=10, num_epochs=1, shuffle=True)

    def first_batch(seed):
        with tf.Graph().as_default() as graph:
            graph.seed = seed
            batch = tf.compat.v1.data.make_one_shot_iterator(input_fn()).get_next()
            with tf.compat.v1.Session() as session:
                return session.run(batch)["x"].tolist()

    assert first_batch(7) == first_batch(7)
    assert first_batch(7) != first_batch(8)
