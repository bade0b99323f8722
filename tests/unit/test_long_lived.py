"""The objects alive before a process's first graph are frozen out of the garbage collector's full passes; what the
calls make after that is collected as before."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import gc, json, tempfile, weakref
    import numpy as np
    import tensorflow as tf
    import elastimator as est

    def model_fn(features, labels, mode):
        w = tf.compat.v1.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
        loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    x, y = np.ones([8, 3], np.float32), np.ones([8, 1], np.float32)
    before = gc.get_freeze_count()
    estimator = est.Estimator(model_fn, model_dir=tempfile.mkdtemp())
    estimator.train(est.inputs.numpy_input_fn({"x": x}, y, batch_size=4, num_epochs=None, shuffle=False), steps=2)
    frozen = gc.get_freeze_count()
    graph = tf.Graph()  # made after the freeze: a graph and its ops refer to each other
    with graph.as_default():
        tf.constant(1.0)
    gone = weakref.ref(graph)
    del graph
    gc.collect()
    print(json.dumps({"before": before, "frozen": frozen, "graph_collected": gone() is None}))
""")


def _run(tmp_path, **env) -> dict:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("setting, frozen", [(None, True), ("0", False)])
def test_the_first_graph_freezes_what_came_before_and_later_garbage_is_still_collected(tmp_path, setting, frozen):
    result = _run(tmp_path, **({} if setting is None else {"ELASTIMATOR_GC_FREEZE": setting}))
    assert result["before"] == 0
    if frozen:
        assert result["frozen"] > 100_000  # TensorFlow's modules and the like: skipped by every full pass
    else:
        assert result["frozen"] == 0
    assert result["graph_collected"]
