"""What the engine changes while a model builds stays with the code that builds it: other threads see TensorFlow's
own optimizer methods and control flow, and the program's Keras seed state is what it was afterwards."""

from __future__ import annotations

import threading

import numpy as np
import tensorflow as tf

import elastimator
from elastimator._context_patch import ContextPatch
from elastimator.estimator.graph import fused_updates
from elastimator.estimator.step import multi_step


class _Greeter:
    def greet(self, name):
        return f"hello {name}"


def _in_thread(fn):
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    return result[0]


def test_a_patched_method_is_replaced_only_in_the_context_that_applies_it():
    patch = ContextPatch(_Greeter, "greet", lambda self, name: f"patched {patch.original(self, name)}")
    greeter = _Greeter()
    with patch.applied():
        assert greeter.greet("a") == "patched hello a"
        assert _in_thread(lambda: greeter.greet("b")) == "hello b"  # another thread, meanwhile
        with patch.applied():  # nested blocks
            assert greeter.greet("c") == "patched hello c"
        assert greeter.greet("d") == "patched hello d"
    assert greeter.greet("e") == "hello e"


def test_fused_adam_is_seen_only_by_the_building_thread():
    with fused_updates.fused_sparse_adam():
        assert fused_updates._PATCH.active  # pylint: disable=protected-access
        assert not _in_thread(lambda: fused_updates._PATCH.active)  # pylint: disable=protected-access


def test_the_steps_loop_builds_without_switching_off_tf2_control_flow():
    seen = []

    def cond(i):
        seen.append(tf.compat.v1.control_flow_v2_enabled())  # what any thread would see during the build
        return i < 3

    with tf.Graph().as_default():
        result = multi_step.v1_while_loop(cond, lambda i: i + 1, [tf.constant(0)])
        assert result.op.type == "Exit"  # a TF1 frame
        with tf.compat.v1.Session() as session:
            assert session.run(result) == 3
    assert seen == [True]


def test_a_seeded_build_gives_the_keras_seed_state_back(tmp_path):
    import keras  # pylint: disable=import-outside-toplevel
    import tf_keras  # pylint: disable=import-outside-toplevel,unused-import
    from keras.src.backend.common import global_state  # pylint: disable=import-outside-toplevel
    from tf_keras.src import backend  # pylint: disable=import-outside-toplevel

    generator = getattr(backend._SEED_GENERATOR, "generator", None)  # pylint: disable=protected-access
    assert global_state.get_global_attribute("global_random_seed") is None
    columns = [tf.feature_column.numeric_column("x")]
    estimator = elastimator.LinearRegressor(columns, model_dir=str(tmp_path),
                                            config=elastimator.RunConfig(tf_random_seed=3))
    estimator.train(lambda: tf.data.Dataset.from_tensors(({"x": np.ones([2, 1], "float32")}, [[1.0], [1.0]])),
                    steps=1)
    assert global_state.get_global_attribute("global_random_seed") is None
    assert getattr(backend._SEED_GENERATOR, "generator", None) is generator  # pylint: disable=protected-access
    assert keras.random.uniform([1]).shape == (1,)  # Keras still draws, unseeded
