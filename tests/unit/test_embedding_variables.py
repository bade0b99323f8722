"""Embedding variables: one row per id, trained sparsely by the v1 optimizers, filtered, evicted, saved, served."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator import embedding as emb
from elastimator.embedding import engine
from elastimator.errors import ConfigError, ModelFnError

DIM = 4


def _model_fn(features, labels, mode, params):
    """Predicts, per example, the sum of its id's row; trained to a per-id target."""
    table = emb.get_embedding_variable(
        "user", embedding_dim=DIM, key_dtype=params.get("key_dtype", tf.int64),
        initializer=tf.compat.v1.random_uniform_initializer(-0.1, 0.1, seed=5),
        partitioner=tf.compat.v1.fixed_size_partitioner(params.get("partitions", 2)),
        ev_option=params.get("option"))
    score = tf.reduce_sum(tf.nn.embedding_lookup(table, features["id"]), axis=1)
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"score": score},
                                 export_outputs={"score": est.export.PredictOutput({"score": score})})
    loss = tf.reduce_mean(tf.square(score - labels))
    optimizer = params.get("optimizer", lambda: tf.compat.v1.train.AdagradOptimizer(0.5))()
    return est.EstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(loss, tf.compat.v1.train.get_global_step()))


def _estimator(tmp_path, name="model", **params):
    return est.Estimator(_model_fn, model_dir=str(tmp_path / name), params=params,
                         config=est.RunConfig(tf_random_seed=1, log_step_count_steps=None, save_summary_steps=None))


def _input(ids, targets, epochs=1, batch=50, key="id"):
    return est.inputs.numpy_input_fn({key: np.asarray(ids)}, np.asarray(targets, np.float32), batch_size=batch,
                                     shuffle=False, num_epochs=epochs)


def _saved(estimator, name):
    return tf.train.load_variable(estimator.latest_checkpoint(), name)


def _saved_ids(estimator, variable="user", table="ids"):
    """{id: value} of `table` ("ids": rows, "seen", or a slot such as "Adagrad/accumulator") over every
    partition of `variable` in the newest checkpoint."""
    values = {}
    names = {n for n, _ in tf.train.list_variables(estimator.latest_checkpoint())}
    part = 0
    while f"{variable}/part_{part}/{table}-keys" in names:
        prefix = f"{variable}/part_{part}/{table}"
        keys, found = _saved(estimator, f"{prefix}-keys"), _saved(estimator, f"{prefix}-values")
        values.update({k.decode() if isinstance(k, bytes) else int(k): v for k, v in zip(keys, found)})
        part += 1
    return values


def test_every_id_gets_a_row_of_its_own_where_a_hash_bucket_would_share_one(tmp_path):
    # 1,000 pairs of ids that a 1,000-bucket table folds together (i and i + 1000), with opposite targets.
    ids = np.concatenate([np.arange(1000), np.arange(1000) + 1000]).astype(np.int64) + 2**40
    targets = np.concatenate([np.ones(1000), -np.ones(1000)])
    estimator = _estimator(tmp_path)
    estimator.train(_input(ids, targets, epochs=30, batch=200))
    rows = _saved_ids(estimator)
    assert sorted(rows) == sorted(ids.tolist())
    scores = np.array([p["score"] for p in estimator.predict(_input(ids, targets))])
    # Each id moved towards its own target; two ids sharing a row could not both (they pull it apart).
    assert (scores * targets).min() > 0.5
    # The table is split over 2 partitions by id mod 2.
    part0 = _saved(estimator, "user/part_0/ids-keys")
    assert len(part0) == 1000 and all(k % 2 == 0 for k in part0)


def _dense_twin(optimizer, ids_per_step, targets_per_step):
    """Trains an embedding variable and a dense table with the same optimizer class and rows; returns both."""
    keys = sorted({int(k) for step in ids_per_step for k in step})
    index = {k: i for i, k in enumerate(keys)}
    with tf.Graph().as_default():
        with engine.model_fn_scope(training=True, num_ps=0):
            step = tf.compat.v1.train.get_or_create_global_step()
            ids = tf.compat.v1.placeholder(tf.int64, [None])
            rows = tf.compat.v1.placeholder(tf.int64, [None])
            target = tf.compat.v1.placeholder(tf.float32, [None])
            table = emb.get_embedding_variable("table", DIM, initializer=tf.compat.v1.constant_initializer(0.3))
            dense = tf.compat.v1.get_variable("dense", [len(keys), DIM],
                                              initializer=tf.compat.v1.constant_initializer(0.3))
            weights = tf.constant([1.0, -2.0, 0.5, 3.0])

            def loss_of(vectors):
                return tf.reduce_sum(tf.square(tf.reduce_sum(vectors * weights, 1) - target))

            train_table = optimizer().minimize(loss_of(tf.nn.embedding_lookup(table, ids)), global_step=step)
            train_dense = optimizer().minimize(loss_of(tf.nn.embedding_lookup(dense, rows)), var_list=[dense])
            with tf.compat.v1.Session() as session:
                session.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()])
                for batch, goal in zip(ids_per_step, targets_per_step):
                    session.run([train_table, train_dense],
                                {ids: batch, rows: [index[k] for k in batch], target: goal})
                found = session.run(tf.nn.embedding_lookup(table, tf.constant(keys, tf.int64)))
                return found, session.run(dense)


@pytest.mark.parametrize("optimizer", [
    lambda: tf.compat.v1.train.GradientDescentOptimizer(0.05),
    lambda: tf.compat.v1.train.AdagradOptimizer(0.3, initial_accumulator_value=0.2),
    lambda: tf.compat.v1.train.AdamOptimizer(0.05),
    lambda: tf.compat.v1.train.FtrlOptimizer(0.3, l1_regularization_strength=0.01, l2_regularization_strength=0.02,
                                             l2_shrinkage_regularization_strength=0.01, beta=0.1),
], ids=["sgd", "adagrad", "adam", "ftrl"])
def test_rows_move_as_the_optimizers_own_kernels_move_a_dense_table(optimizer):
    rng = np.random.RandomState(0)
    keys = [7, 2**35, 12, 99]
    # Every step reads every id (repeated, in another order), so v1 Adam's dense decay touches the same rows.
    steps = [rng.permutation(keys + list(rng.choice(keys, 4))) for _ in range(6)]
    goals = [rng.normal(size=len(s)).astype(np.float32) for s in steps]
    ours, theirs = _dense_twin(optimizer, steps, goals)
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)


def test_several_steps_per_session_call_train_the_same_rows_as_one(tmp_path):
    ids = np.arange(60, dtype=np.int64) * 7_919
    targets = np.linspace(-1, 1, 60)
    rows = []
    for steps in (1, 4):
        estimator = est.Estimator(_model_fn, model_dir=str(tmp_path / f"steps{steps}"), params={},
                                  config=est.RunConfig(tf_random_seed=1, steps_per_execution=steps,
                                                       log_step_count_steps=None, save_summary_steps=None))
        estimator.train(_input(ids, targets, epochs=4, batch=12))
        rows.append(_saved_ids(estimator))
    assert sorted(rows[0]) == sorted(rows[1]) == sorted(ids.tolist())
    for key, row in rows[0].items():
        np.testing.assert_allclose(rows[1][key], row, rtol=1e-6)


def test_a_counter_filter_admits_an_id_on_its_third_occurrence(tmp_path):
    option = emb.EmbeddingVariableOption(filter_option=emb.CounterFilter(filter_freq=3),
                                         init_option=emb.InitializerOption(default_value_no_permission=0.0))
    estimator = _estimator(tmp_path, option=option, optimizer=lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1))
    # id 5 occurs twice, id 6 three times and id 7 four times, over two steps.
    estimator.train(_input([5, 6, 7, 7, 5, 6, 6, 7, 7], [1.0] * 9, batch=4))
    assert sorted(_saved_ids(estimator)) == [6, 7]
    occurrences = _saved_ids(estimator, table="seen")
    assert {k: int(v[0]) for k, v in occurrences.items()} == {5: 2, 6: 3, 7: 4}


def test_ids_not_seen_for_steps_to_live_are_evicted_before_the_checkpoint(tmp_path):
    option = emb.EmbeddingVariableOption(evict_option=emb.GlobalStepEvict(steps_to_live=3))
    estimator = _estimator(tmp_path, option=option)
    # Steps 1-2 read ids 1..4; steps 3-8 read only ids 1 and 2.
    ids = [1, 2, 3, 4] * 2 + [1, 2, 1, 2] * 6
    estimator.train(_input(ids, [0.5] * len(ids), batch=4))
    assert sorted(_saved_ids(estimator)) == [1, 2]
    assert sorted(_saved_ids(estimator, table="Adagrad/accumulator")) == [1, 2]  # their optimizer slots went too


def test_training_resumed_from_a_checkpoint_moves_exactly_as_training_straight_through(tmp_path):
    ids = np.arange(40, dtype=np.int64) * 1_000_003
    targets = np.linspace(-1, 1, 40)
    adam = {"optimizer": lambda: tf.compat.v1.train.AdamOptimizer(0.05)}
    straight = _estimator(tmp_path, "straight", **adam)
    straight.train(_input(ids, targets, epochs=10, batch=10))
    first = _estimator(tmp_path, "resumed", **adam)
    first.train(_input(ids, targets, epochs=5, batch=10))
    before = _saved_ids(first)
    second = _estimator(tmp_path, "resumed", **adam)  # a new process would do the same: restore, then train
    scores = np.array([p["score"] for p in second.predict(_input(ids, targets))])
    np.testing.assert_allclose(scores, [before[int(k)].sum() for k in ids], rtol=1e-6)
    second.train(_input(ids, targets, epochs=5, batch=10))
    # Ids, rows and Adam's m and v all came back: the result is the same, to the bit.
    resumed, reference = _saved_ids(second), _saved_ids(straight)
    assert sorted(resumed) == sorted(reference)
    for key, row in reference.items():
        np.testing.assert_array_equal(resumed[key], row)


def test_the_export_serves_trained_rows_and_the_initial_row_of_an_unseen_id(tmp_path):
    ids = np.array([3, 11, 2**40], np.int64)
    estimator = _estimator(tmp_path)
    estimator.train(_input(ids, [1.0, -1.0, 0.5], epochs=50, batch=3))
    def receiver():
        ids = tf.compat.v1.placeholder(tf.int64, [None], name="id")
        return est.export.ServingInputReceiver({"id": ids}, {"id": ids})

    path = estimator.export_saved_model(str(tmp_path / "export"), receiver)
    served = tf.saved_model.load(path).signatures["serving_default"]
    unseen = 123_456_789
    scores = served(id=tf.constant([3, 11, 2**40, unseen], tf.int64))["score"].numpy()
    np.testing.assert_allclose(scores[:3], [1.0, -1.0, 0.5], atol=0.05)
    default_rows = _saved(estimator, "user/default_rows")
    np.testing.assert_allclose(scores[3], default_rows[unseen % 4096].sum(), rtol=1e-5)
    # Serving looked ids up without adding them.
    assert served(id=tf.constant([unseen], tf.int64))["score"].numpy()[0] == pytest.approx(scores[3])


def test_string_ids_and_feature_columns_with_the_scope_partitioner(tmp_path):
    def model_fn(features, labels, mode, params):
        column = emb.embedding_column(emb.categorical_column_with_embedding("word", dtype=tf.string), dimension=3,
                                      combiner="sum")
        outputs = {}
        with tf.compat.v1.variable_scope("input_layer", partitioner=tf.compat.v1.fixed_size_partitioner(3),
                                         reuse=tf.compat.v1.AUTO_REUSE):
            dense = tf.compat.v1.feature_column.input_layer(features, [column], cols_to_output_tensors=outputs)
        assert outputs[column] is not None
        score = tf.reduce_sum(dense, 1)
        loss = tf.reduce_mean(tf.square(score - labels))
        train_op = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op)

    words = np.array(["a", "b", "c", "d", "e", "f"] * 10)
    targets = np.tile(np.arange(6, dtype=np.float32), 10)
    estimator = est.Estimator(model_fn, model_dir=str(tmp_path / "m"), config=est.RunConfig(tf_random_seed=2))
    estimator.train(_input(words, targets, epochs=40, batch=12, key="word"))
    assert estimator.evaluate(_input(words, targets, key="word"))["loss"] < 0.01
    names = {n for n, _ in tf.train.list_variables(estimator.latest_checkpoint())}
    saved = [n for n in names if n.endswith("/ids-keys")]
    assert len(saved) == 3 and all(n.startswith("input_layer/input_layer/word_embedding/embedding_weights/part_")
                                   for n in saved)
    assert sum(len(tf.train.load_variable(estimator.latest_checkpoint(), n)) for n in saved) == 6


def test_embedding_lookup_sparse_combines_each_rows_ids():
    with tf.Graph().as_default(), engine.model_fn_scope(training=False, num_ps=0):
        table = emb.get_embedding_variable("t", 2, initializer=tf.compat.v1.constant_initializer(1.0))
        ids = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([4, 9, 4], tf.int64), [3, 2])
        weights = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], [1.0, 3.0, 2.0], [3, 2])
        combined = {c: tf.nn.embedding_lookup_sparse(table, ids, weights, combiner=c) for c in ("sum", "mean", "sqrtn")}
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            got = session.run(combined)
    np.testing.assert_allclose(got["sum"], [[4, 4], [0, 0], [2, 2]])
    np.testing.assert_allclose(got["mean"], [[1, 1], [0, 0], [1, 1]])
    np.testing.assert_allclose(got["sqrtn"], [[4 / np.sqrt(10)] * 2, [0, 0], [1, 1]], rtol=1e-6)


def test_mistakes_get_errors_that_say_what_to_do():
    with tf.Graph().as_default():
        emb.get_embedding_variable("a", 2)
        with pytest.raises(ConfigError, match="already exists.*reuse"):
            emb.get_embedding_variable("a", 2)
        with pytest.raises(ConfigError, match="embedding_dim must be a positive int"):
            emb.get_embedding_variable("b", 0)
        with pytest.raises(ConfigError, match="CounterFilter: filter_freq must be an int"):
            emb.CounterFilter(filter_freq="3")
        table = emb.get_embedding_variable("c", 2, key_dtype=tf.int64)
        with pytest.raises(TypeError, match="has int64 ids; got string ids"):
            tf.nn.embedding_lookup(table, tf.constant(["x"]))
        with engine.model_fn_scope(training=True, num_ps=0):
            tf.compat.v1.train.get_or_create_global_step()
            loss = tf.reduce_sum(tf.nn.embedding_lookup(table, tf.constant([1], tf.int64)))
            with pytest.raises(ModelFnError, match="got MomentumOptimizer"):
                tf.compat.v1.train.MomentumOptimizer(0.1, 0.9).minimize(loss)


def test_deeprec_spellings_resolve_under_compat():
    from elastimator import compat

    was_installed = compat.installed()
    compat.install()
    try:
        v1 = tf.compat.v1
        assert v1.get_embedding_variable is emb.get_embedding_variable
        assert tf.EmbeddingVariableOption is emb.EmbeddingVariableOption
        assert v1.CounterFilter is emb.CounterFilter and v1.GlobalStepEvict is emb.GlobalStepEvict
        column = v1.feature_column.categorical_column_with_embedding("C1", dtype=tf.string)
        assert isinstance(v1.feature_column.embedding_column(column, 4), emb.columns.EmbeddingVariableColumn)
        hashed = tf.feature_column.categorical_column_with_hash_bucket("C2", 10)
        assert type(tf.feature_column.embedding_column(hashed, 4)).__name__ == "EmbeddingColumn"
    finally:
        if not was_installed:
            compat.uninstall()
    if not was_installed:
        assert not hasattr(tf, "get_embedding_variable")
        assert tf.feature_column.embedding_column is not emb.embedding_column
