"""Fused Adam updates for embedding gradients: the same training, one kernel per table."""

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est

ROWS, DIM = 50, 4


def _embedding_model_fn(features, labels, mode, params):
    table = tf.compat.v1.get_variable("table", [ROWS, DIM], initializer=tf.compat.v1.random_normal_initializer(
        stddev=0.1, seed=3))
    logits = tf.reduce_sum(tf.nn.embedding_lookup(table, features["ids"]), axis=[1, 2])
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    optimizer = params["optimizer"]()
    train_op = optimizer.minimize(loss, tf.compat.v1.train.get_global_step())
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input():
    ids = np.random.RandomState(0).randint(0, 20, size=(64, 6))  # rows repeat within each batch
    labels = (ids.sum(axis=1) % 2).astype(np.float32)
    return est.inputs.numpy_input_fn({"ids": ids}, labels, batch_size=16, shuffle=False, num_epochs=None)


def _train(tmp_path, name, fuse, optimizer=lambda: tf.compat.v1.train.AdamOptimizer(0.05)):
    estimator = est.Estimator(_embedding_model_fn, model_dir=str(tmp_path / name), params={"optimizer": optimizer},
                              config=est.RunConfig(tf_random_seed=1, fuse_sparse_updates=fuse,
                                                   log_step_count_steps=None, save_summary_steps=None))
    estimator.train(_input(), steps=20)
    return estimator


def _update_ops(estimator) -> set[str]:
    """The op types that update the table, read from the graph the newest checkpoint saved."""
    tf.compat.v1.train.import_meta_graph(tf.train.latest_checkpoint(estimator.model_dir) + ".meta")
    return {op.type for op in tf.compat.v1.get_default_graph().get_operations() if "update_table" in op.name}


def test_fused_and_unfused_adam_train_the_same_embedding(tmp_path):
    fused, plain = _train(tmp_path, "fused", True), _train(tmp_path, "plain", False)
    for name in ("table", "table/Adam", "table/Adam_1"):
        np.testing.assert_allclose(fused.get_variable_value(name), plain.get_variable_value(name), rtol=1e-5,
                                   atol=1e-7)
    with tf.Graph().as_default():
        assert "ResourceApplyAdam" in _update_ops(fused) and "ResourceScatterAdd" not in _update_ops(fused)
    with tf.Graph().as_default():
        assert "ResourceScatterAdd" in _update_ops(plain)


class _SignSGD(tf.compat.v1.train.AdamOptimizer):
    """A subclass with its own sparse rule: only the rows in the batch change."""

    def _resource_apply_sparse(self, grad, var, indices):
        return tf.raw_ops.ResourceScatterSub(resource=var.handle, indices=indices, updates=0.05 * tf.sign(grad))


def test_a_subclass_with_its_own_sparse_rule_keeps_it(tmp_path):
    own_rule = _train(tmp_path, "own", True, optimizer=lambda: _SignSGD(0.05))
    with tf.Graph().as_default():
        ops = _update_ops(own_rule)
    assert "ResourceScatterSub" in ops and "ResourceApplyAdam" not in ops


def test_the_patch_is_gone_after_the_model_is_built(tmp_path):
    original = tf.compat.v1.train.AdamOptimizer._resource_apply_sparse_duplicate_indices
    _train(tmp_path, "once", True)
    assert tf.compat.v1.train.AdamOptimizer._resource_apply_sparse_duplicate_indices is original


def test_fuse_sparse_updates_is_validated():
    with pytest.raises(est.ConfigError, match="fuse_sparse_updates must be a bool"):
        est.RunConfig(fuse_sparse_updates="yes")


@pytest.mark.parametrize("shape, dtype, index_dtype", [
    ((ROWS, DIM), tf.float32, tf.int64),
    ((ROWS,), tf.float64, tf.int32),
    ((ROWS, 2, 3), tf.bfloat16, tf.int64),
])
def test_rows_are_summed_exactly_as_unsorted_segment_sum(shape, dtype, index_dtype):
    from elastimator.estimator.graph.fused_updates import _sum_rows

    rng = np.random.RandomState(1)
    indices = tf.constant(rng.randint(0, ROWS, size=300), index_dtype)  # about six of each row
    grad = tf.cast(tf.constant(rng.normal(size=(300,) + shape[1:])), dtype)
    with tf.device("/CPU:0"):
        summed = _sum_rows(grad, indices, ROWS, "/device:CPU:0")
    expected = tf.math.unsorted_segment_sum(grad, indices, ROWS)
    assert summed.shape == expected.shape == shape
    np.testing.assert_array_equal(tf.cast(summed, tf.float64).numpy(), tf.cast(expected, tf.float64).numpy())


def _update_allocations(in_place: bool, monkeypatch) -> int:
    """Bytes the table's update ops allocate in one traced training step, after two untraced ones."""
    from elastimator.estimator.graph import fused_updates

    if not in_place:
        monkeypatch.setattr(fused_updates, "_in_place", lambda variable, after: [])
    with tf.Graph().as_default(), fused_updates.fused_sparse_adam():
        table = tf.compat.v1.get_variable("table", [ROWS, DIM], initializer=tf.compat.v1.ones_initializer())
        ids = tf.compat.v1.placeholder_with_default(tf.constant([1, 2, 2, 7]), [None])  # nothing to fold away
        loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(table, ids)))
        train_op = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss)
        update_names = {op.name for op in tf.compat.v1.get_default_graph().get_operations()
                        if op.name.startswith("Adam/update_table/")}
        assert update_names, "the graph has no update ops for the table"
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train_op)
            session.run(train_op)
            metadata = tf.compat.v1.RunMetadata()
            session.run(train_op, options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                        run_metadata=metadata)
    return sum(memory.total_bytes for device in metadata.step_stats.dev_stats for node in device.node_stats
               if node.node_name in update_names for memory in node.memory)


def test_the_adam_kernel_updates_a_looked_up_table_in_place(monkeypatch):
    table_bytes = ROWS * DIM * 4
    # The lookup leaves the table in copy-on-read mode; without switching it off, each update copies the table.
    assert _update_allocations(in_place=False, monkeypatch=monkeypatch) >= 2 * table_bytes
    monkeypatch.undo()
    # In place, the only table-sized buffer is the dense gradient the sum produces.
    assert _update_allocations(in_place=True, monkeypatch=monkeypatch) < 2 * table_bytes
