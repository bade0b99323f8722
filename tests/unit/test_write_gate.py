"""The write gate: a training call's writes wait for a host check; reads and the input do not."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from elastimator.estimator.step import training_step, write_gate


def _model():
    """A tiny training step: a batch from an iterator, a loss read from a variable, Adam updates, a global step."""
    global_step = tf.compat.v1.train.get_or_create_global_step()
    batch = tf.compat.v1.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices(np.arange(12, dtype=np.float32).reshape(6, 2)).repeat()).get_next()
    weight = tf.compat.v1.get_variable("w", initializer=tf.ones([2]), use_resource=True)
    loss = tf.reduce_sum(weight * batch)
    train_op = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, global_step=global_step)
    return batch, weight, loss, train_op, global_step


def test_updates_count_as_writes_and_reads_and_the_input_do_not():
    with tf.Graph().as_default():
        _, _, _, train_op, _ = _model()
        ops = {op.type for op in tf.compat.v1.get_default_graph().get_operations() if write_gate.writes_state(op)}
    assert {"ResourceApplyAdam", "AssignAddVariableOp"} <= ops
    assert not ops & {"ReadVariableOp", "IteratorGetNext", "VarHandleOp"}


def test_a_call_writes_nothing_until_its_check_returns():
    release, checked = threading.Event(), []

    def check(batch):
        checked.append(batch.tolist())
        release.wait()
        return True

    with tf.Graph().as_default():
        batch, weight, _, train_op, global_step = _model()
        write_gate.gate_writes(train_op, check, tensors=[batch])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            call = threading.Thread(target=session.run, args=(train_op,))
            call.start()
            # Whether or not the call has reached the gate yet, nothing it writes can have landed.
            assert session.run(global_step) == 0 and session.run(weight).tolist() == [1.0, 1.0]
            release.set()
            call.join()
            assert session.run(global_step) == 1 and session.run(weight).tolist() != [1.0, 1.0]
    assert checked == [[0.0, 1.0]]  # the call's own batch


def test_a_withdrawn_batch_fails_its_call_before_any_write_and_the_next_call_trains():
    verdicts = iter([False, True])
    with tf.Graph().as_default():
        batch, weight, _, train_op, global_step = _model()
        write_gate.gate_writes(train_op, lambda batch: next(verdicts), tensors=[batch])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            with pytest.raises(tf.errors.InvalidArgumentError) as failed:
                session.run(train_op)
            assert training_step.is_withdrawn(failed.value)
            assert session.run(global_step) == 0 and session.run(weight).tolist() == [1.0, 1.0]
            session.run(train_op)
            assert session.run(global_step) == 1


def test_a_value_computed_from_a_write_reaches_the_check_as_none_instead_of_deadlocking():
    seen = []
    with tf.Graph().as_default():
        batch, _, _, train_op, global_step = _model()
        with tf.control_dependencies([train_op]):
            after_update = tf.identity(global_step.read_value())
        write_gate.gate_writes(train_op, lambda b, s: seen.append((b is None, s is None)) or True,
                               tensors=[batch, after_update])
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train_op)
    assert seen == [(False, True)]


def test_a_graph_check_that_decides_alone_withdraws_the_batch_with_no_python_call():
    checked = []
    with tf.Graph().as_default():
        batch, weight, _, train_op, global_step = _model()
        gate = write_gate.gate_writes(train_op, lambda b: checked.append(b) or True, tensors=[batch],
                                      fast=lambda b: b[0] < 3)
        assert gate.fast and gate.holds_writes
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(train_op)  # batch [0, 1]
            session.run(train_op)  # batch [2, 3]
            written = session.run(weight)
            with pytest.raises(tf.errors.InvalidArgumentError) as withdrawn:
                session.run(train_op)  # batch [4, 5]: withdrawn before any write
            assert training_step.is_withdrawn(withdrawn.value)
            assert session.run(global_step) == 2 and np.array_equal(session.run(weight), written)
    assert checked == []


def test_no_fast_check_where_the_check_gets_a_value_it_cannot_wait_for():
    with tf.Graph().as_default():
        batch, _, _, train_op, global_step = _model()
        with tf.control_dependencies([train_op]):
            after_update = tf.identity(global_step.read_value())
        gate = write_gate.gate_writes(train_op, lambda b, s: True, tensors=[batch, after_update],
                                      fast=lambda b, s: tf.constant(True))
    assert not gate.fast
