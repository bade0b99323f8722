"""A finalized graph's GraphDef is made once and shared by what records it; the meta graphs elastimator's saver
writes are the graph's, as TensorFlow's saver writes them."""

import os

import tensorflow as tf

from elastimator.estimator.saving import graph_defs


def _graph():
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.Variable(tf.ones([2, 3]), name="weights")
        saver = graph_defs.Saver()
    return graph, saver


def test_a_finalized_graph_is_serialized_once_and_a_graph_being_built_each_time():
    graph, _ = _graph()
    assert graph_defs.of(graph) is not graph_defs.of(graph)  # still being built: what it is now
    graph.finalize()
    shared = graph_defs.of(graph)
    assert graph_defs.of(graph) is shared
    assert shared == graph.as_graph_def(add_shapes=True)
    graph._unsafe_unfinalize()  # pylint: disable=protected-access
    with graph.as_default():
        tf.constant(1.0, name="added")
    graph.finalize()
    assert "added" in {node.name for node in graph_defs.of(graph).node}  # changed since: made again


def test_the_saver_writes_the_same_meta_graph_as_tensorflows(tmp_path):
    graph, saver = _graph()
    with graph.as_default():
        theirs = tf.compat.v1.train.Saver()
        initialize = tf.compat.v1.global_variables_initializer()
        graph.finalize()
        with tf.compat.v1.Session() as session:
            session.run(initialize)
            ours_path = saver.save(session, str(tmp_path / "ours" / "model.ckpt"), global_step=1)
            theirs_path = theirs.save(session, str(tmp_path / "theirs" / "model.ckpt"), global_step=1)
    ours, reference = tf.compat.v1.MetaGraphDef(), tf.compat.v1.MetaGraphDef()
    with open(ours_path + ".meta", "rb") as f:
        ours.ParseFromString(f.read())
    with open(theirs_path + ".meta", "rb") as f:
        reference.ParseFromString(f.read())
    assert ours.graph_def == reference.graph_def
    assert set(ours.collection_def) == set(reference.collection_def)
    assert ours.saver_def.filename_tensor_name and os.path.exists(ours_path + ".index")
