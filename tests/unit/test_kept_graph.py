"""A kept graph's life (estimator/loops/kept_graph.py) and the engine's background work (loops/background.py): the
stages a graph goes through, the order of each graph's background work, and what a failed free leaves behind, on a
real graph and session with nothing of the estimator around them."""

import threading

import pytest
import tensorflow as tf

from elastimator.estimator import tf_internals
from elastimator.estimator.loops import background, call_plan
from elastimator.estimator.loops.kept_graph import KeptGraph, Served, Stage


def test_background_work_on_one_graph_runs_in_the_order_it_was_given():
    gate, order = threading.Event(), []

    def first():
        gate.wait(30)
        order.append("first")
        raise ValueError("a failed piece of work does not hold up the next")

    earlier = background.submit(first)
    later = background.submit(lambda: order.append("second"), after=earlier)
    gate.set()
    later.result(timeout=30)
    assert order == ["first", "second"]
    with pytest.raises(ValueError):
        earlier.result()


def kept(release_fails: bool = False) -> KeptGraph:
    """A graph with an iterator over three numbers, as a call leaves it: its session made, the input started."""
    graph = tf.Graph()
    with graph.as_default():
        dataset = tf.data.Dataset.range(3)
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        value = iterator.get_next()
        counter = tf.compat.v1.Variable(0, name="counter")
        reset = tf.compat.v1.local_variables_initializer()
        release = (tf.debugging.assert_equal(tf.compat.v1.placeholder_with_default(1, []), 2) if release_fails
                   else iterator.make_initializer(dataset.take(0)))
        saver = tf.compat.v1.train.Saver()
        init = tf.compat.v1.global_variables_initializer()
    graph.finalize()
    session = tf.compat.v1.Session(graph=graph)
    session.run([init, iterator.initializer])
    del counter
    return KeptGraph(mode="infer", key=("model",), graph=graph, session=session, iterator=iterator, saver=saver,
                     release=release, payload=Served(fetches={"batch": value}, runs={}, writes_model=False),
                     restored=None, reset=reset)


def test_a_kept_graph_goes_from_its_call_to_idle_to_the_next_call_and_is_closed_once():
    warm = kept()
    assert warm.stage is Stage.IN_USE and warm.calls == 1
    warm.idle()  # its input freed in the background
    assert warm.stage is Stage.IDLE
    assert call_plan.reuse(warm.facts(same_key=True))  # (waits for the free)
    warm.taken()
    assert warm.stage is Stage.IN_USE and warm.calls == 2
    session = warm.session
    warm.close()
    assert warm.stage is Stage.CLOSED and warm.session is None and tf_internals.session_closed(session)


def test_a_resting_graph_has_no_session_and_is_taken_again():
    warm = kept()
    warm.idle()
    session = warm.session
    warm.rest()
    assert warm.stage is Stage.RESTING and warm.session is None
    assert call_plan.reuse(warm.facts(same_key=True))  # (waits for the close)
    assert tf_internals.session_closed(session)
    warm.taken()
    assert warm.stage is Stage.IN_USE


def test_a_stage_out_of_turn_is_refused_with_the_stage_it_is_in():
    warm = kept()
    with pytest.raises(RuntimeError, match="expected stage idle, it is in use"):
        warm.rest()
    with pytest.raises(RuntimeError, match="expected stage idle or resting, it is in use"):
        warm.taken()
    warm.close()


def test_a_graph_whose_input_could_not_be_freed_serves_no_other_call():
    warm = kept(release_fails=True)
    warm.idle()
    decision = call_plan.reuse(warm.facts(same_key=True))
    assert not decision and "freeing the kept graph's input failed" in decision.reason
    warm.close()
