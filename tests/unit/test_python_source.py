"""from_python: a generator's elements through ordinary dataset ops, never a GeneratorDataset."""

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.data import DataSetInput, DataSetSpec
from elastimator.inputs.python_source import from_python

SIGNATURE = {"ids": tf.TensorSpec([None], tf.int64), "text": tf.TensorSpec([], tf.string)}


def _counting(n):
    def generate():
        for i in range(n):
            yield {"ids": np.arange(i), "text": f"row {i}".encode()}

    return generate


def test_elements_come_in_order_and_each_iteration_starts_the_generator_anew():
    dataset = from_python(_counting(3), SIGNATURE)
    for _ in range(2):
        elements = list(dataset.as_numpy_iterator())
        assert [e["ids"].tolist() for e in elements] == [[], [0], [0, 1]]
        assert [e["text"] for e in elements] == [b"row 0", b"row 1", b"row 2"]
    assert dataset.element_spec == SIGNATURE


def test_tuples_unicode_and_an_empty_generator():
    signature = (tf.TensorSpec([None], tf.string), tf.TensorSpec([2], tf.float32))
    dataset = from_python(lambda: iter([(np.array(["a", "bé"]), [1, 2])]), signature)
    ((words, numbers),) = list(dataset.as_numpy_iterator())
    assert words.tolist() == [b"a", "bé".encode()] and numbers.dtype == np.float32
    assert list(from_python(lambda: iter([]), signature).as_numpy_iterator()) == []


def test_a_generator_error_or_a_wrong_shape_fails_the_iteration_with_its_message():
    def failing():
        yield {"ids": np.arange(2), "text": b"fine"}
        raise OSError("disk went away")

    with pytest.raises(tf.errors.OpError, match="disk went away"):
        list(from_python(failing, SIGNATURE).as_numpy_iterator())
    wrong = from_python(lambda: iter([{"ids": np.zeros([2, 2]), "text": b"x"}]), SIGNATURE, name="wrong")
    with pytest.raises(tf.errors.OpError, match=r"wrong: expected a value of shape \(None,\); got one of shape"):
        list(wrong.as_numpy_iterator())


class _Lines:
    def iterator(self):
        yield from ("1,2", "3,4")


@pytest.mark.parametrize("make_input", [
    lambda: DataSetInput(DataSetSpec(reader=_Lines(), columns=(est.Column.create("x", "float32"),
                                                              est.Column.create("y", "float32", is_label=True)),
                                     batch_size=2, name="train_set")),
    lambda: est.inputs.numpy_input_fn({"x": np.arange(4.0)}, np.arange(4), batch_size=2, shuffle=False),
], ids=["python_reader", "numpy_input_fn"])
def test_elastimator_inputs_build_no_generator_dataset(make_input):
    # TensorFlow builds a GeneratorDataset kernel with mallopt(M_MMAP_THRESHOLD, 128 KiB) for the whole process:
    # every large tensor afterwards is a fresh mmap (python_source's module doc).
    with tf.Graph().as_default() as graph:
        features, _ = tf.compat.v1.data.make_one_shot_iterator(make_input()()).get_next()
        with tf.compat.v1.Session() as session:
            assert len(session.run(features["x"])) == 2
        ops = {op.type for op in graph.get_operations()}
        functions = {node.op for f in graph.as_graph_def().library.function for node in f.node_def}
    assert "GeneratorDataset" not in ops | functions


def test_an_input_fn_using_from_generator_is_warned_about_once(caplog, monkeypatch):
    from elastimator.estimator.graph import calls
    from elastimator.inputs import python_source

    monkeypatch.setattr(python_source, "_warned", False)
    spec = tf.TensorSpec([None], tf.int64)

    def generator_input_fn():  # as DLRover's iris example writes it
        dataset = tf.data.Dataset.from_generator(lambda: iter([np.arange(3)]), output_signature=spec)
        return tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()

    def python_input_fn():
        return from_python(lambda: iter([np.arange(3)]), spec)

    def build(input_fn):
        with tf.Graph().as_default():
            calls.call_input_fn(input_fn, est.ModeKeys.TRAIN, {}, est.RunConfig())

    build(python_input_fn)
    assert "from_generator" not in caplog.text
    build(generator_input_fn)
    build(generator_input_fn)
    assert caplog.text.count("elastimator.inputs.from_python(generator_fn, output_signature)") == 1


def test_the_end_of_a_generator_under_tf1_shapes():
    # DLRover's programs run with TF1 shape behavior, where a shape's dimensions are Dimension objects.
    tf.compat.v1.disable_v2_tensorshape()
    try:
        dataset = from_python(_counting(2), SIGNATURE)
        assert [e["text"] for e in dataset.as_numpy_iterator()] == [b"row 0", b"row 1"]
    finally:
        tf.compat.v1.enable_v2_tensorshape()
