"""What frameworks built on tf.estimator lean on, each pinned to 2.15's behaviour: the checkpoint the `checkpoint`
state file names, a model's own local_init_op in evaluation, tf-keras metrics updated through a tf.function, the
nested compat modules, Estimator's private members, the private modules (util, gc, training's executor)."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import elastimator as est
from elastimator.estimator.saving import checkpoints
from tests.helpers import linear_model_fn

X = np.random.RandomState(0).rand(120, 4).astype("float32")
Y = (X[:, 0] * 3).astype("int64") % 3


def _input(epochs=None):
    return est.inputs.numpy_input_fn({"x": X}, Y, batch_size=10, num_epochs=epochs, shuffle=epochs is None)


def _estimator(model_dir, save_checkpoints_steps=50):
    return est.Estimator(linear_model_fn, model_dir=str(model_dir), params={"n_classes": 3},
                         config=est.RunConfig(save_checkpoints_steps=save_checkpoints_steps, log_step_count_steps=None))


def _point_state_file_at(model_dir, step):
    tf.compat.v1.train.update_checkpoint_state(str(model_dir), f"model.ckpt-{step}",
                                               ["model.ckpt-50", "model.ckpt-100"])


def test_the_checkpoint_the_state_file_names_is_restored_not_the_highest_step(tmp_path):
    estimator = _estimator(tmp_path / "m")
    estimator.train(_input(), max_steps=100)
    _point_state_file_at(tmp_path / "m", 50)  # a user rolls the model back
    assert estimator.latest_checkpoint().endswith("model.ckpt-50")
    assert estimator.evaluate(_input(1))["global_step"] == 50
    estimator.train(_input(), steps=10)
    assert estimator.latest_checkpoint().endswith("model.ckpt-60")
    assert checkpoints.global_step_of(estimator.latest_checkpoint()) == 60


def test_a_state_file_naming_another_prefix_is_followed(tmp_path):
    """AdaNet points the state file at increment.ckpt-N: that is what is restored."""
    estimator = _estimator(tmp_path / "m")
    estimator.train(_input(), max_steps=50)
    model_dir = str(tmp_path / "m")
    for path in glob.glob(os.path.join(model_dir, "model.ckpt-50.*")):
        os.link(path, path.replace("model.ckpt-50", "increment.ckpt-1"))
    estimator.train(_input(), max_steps=100)
    tf.compat.v1.train.update_checkpoint_state(model_dir, "increment.ckpt-1")
    assert estimator.latest_checkpoint().endswith("increment.ckpt-1")
    assert estimator.evaluate(_input(1))["global_step"] == 50


def test_a_damaged_named_checkpoint_falls_back_to_one_that_reads_whole(tmp_path):
    estimator = _estimator(tmp_path / "m")
    estimator.train(_input(), max_steps=100)
    _point_state_file_at(tmp_path / "m", 50)
    os.remove(str(tmp_path / "m" / "model.ckpt-50.index"))
    assert estimator.latest_checkpoint().endswith("model.ckpt-100")


def _local_init_model_fn(features, labels, mode):
    """A model whose scaffold has its own local_init_op (as AdaNet's has), beside the metrics' local variables."""
    own = tf.compat.v1.get_local_variable("own_counter", initializer=tf.constant(5.0))
    logits = tf.compat.v1.layers.dense(features["x"], 3)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    step = tf.compat.v1.train.get_global_step()
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
    scaffold = tf.compat.v1.train.Scaffold(local_init_op=tf.group(own.initializer))
    if mode != est.ModeKeys.EVAL:
        return est.EstimatorSpec(mode, loss=loss, train_op=train_op, scaffold=scaffold, predictions={"logits": logits})
    metrics = {"mean_x": tf.compat.v1.metrics.mean(features["x"]), "own": (tf.identity(own), tf.no_op())}
    return est.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics, scaffold=scaffold)


def test_evaluation_runs_the_models_local_init_op_with_the_default_one(tmp_path):
    estimator = est.Estimator(_local_init_model_fn, model_dir=str(tmp_path / "m"))
    estimator.train(_input(), max_steps=5)
    metrics = estimator.evaluate(_input(1))  # was: "Variables not initialized: mean/total, mean/count"
    assert metrics["own"] == 5.0
    assert metrics["mean_x"] == pytest.approx(X.mean(), rel=1e-5)


def _tf_keras_metric_model_fn(features, labels, mode):
    import tf_keras  # pylint: disable=import-outside-toplevel

    logits = tf.compat.v1.layers.dense(features["x"], 3)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, tf.compat.v1.train.get_global_step())
    accuracy = tf_keras.metrics.SparseCategoricalAccuracy(name="acc")
    accuracy.update_state(labels, logits)  # a tf.function: one call op holds the assignments
    v1_accuracy = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))
    return est.EstimatorSpec(mode, loss=loss, train_op=train_op,
                             eval_metric_ops={"metric/acc": accuracy, "v1_acc": v1_accuracy})


def test_a_tf_keras_metric_updated_through_a_tf_function_counts_as_updated(tmp_path):
    estimator = est.Estimator(_tf_keras_metric_model_fn, model_dir=str(tmp_path / "m"))
    estimator.train(_input(), max_steps=30)
    metrics = estimator.evaluate(_input(1))
    # Updated over every batch, as the v1 metric of the same predictions: a metric never updated would read 0.
    assert metrics["metric/acc"] == pytest.approx(metrics["v1_acc"]) and metrics["v1_acc"] > 0


def test_every_nested_compat_module_has_estimator():
    from elastimator import compat  # pylint: disable=import-outside-toplevel

    compat.install()
    try:
        import tensorflow.compat.v1 as tf1  # pylint: disable=import-outside-toplevel
        import tensorflow.compat.v2 as tf2  # pylint: disable=import-outside-toplevel

        for namespace, v1 in ((tf.compat.v1, True), (tf2.compat.v1, True), (tf1.compat.v1, True),
                              (tf2.compat.v2, False), (tf1.compat.v2, False), (tf2, False), (tf1, True)):
            assert namespace.estimator.Estimator is est.Estimator
            assert hasattr(namespace.estimator, "inputs") == v1
        assert tf2.compat.v1.estimator.tpu.TPUEstimator is est.tpu.TPUEstimator  # AdaNet's spelling
    finally:
        compat.uninstall()


class _Recording(est.Estimator):
    """A framework's Estimator subclass: overrides _call_model_fn, builds a graph with the private members."""

    calls: list

    def _call_model_fn(self, features, labels, mode, config):
        self.calls.append(mode)
        return super()._call_model_fn(features, labels, mode, config)


def test_private_members_keep_2_15s_meaning_and_an_override_sees_every_model_fn_call(tmp_path):
    estimator = _Recording(linear_model_fn, model_dir=str(tmp_path / "m"), params={"n_classes": 3},
                           config=est.RunConfig(session_config=tf.compat.v1.ConfigProto(log_device_placement=False)))
    estimator.calls = []
    estimator.train(_input(), max_steps=3)
    estimator.evaluate(_input(1))
    next(iter(estimator.predict(_input(1))))
    assert estimator.calls == ["train", "eval", "infer"]
    assert estimator._session_config is estimator.config.session_config  # pylint: disable=protected-access
    assert estimator._train_distribution is None and estimator._warm_start_settings is None  # pylint: disable=protected-access
    with tf.Graph().as_default() as graph:
        step = estimator._create_and_assert_global_step(graph)  # pylint: disable=protected-access
        assert step is tf.compat.v1.train.get_global_step(graph) and step.dtype.base_dtype == tf.int64
        features, labels, hooks = estimator._get_features_and_labels_from_input_fn(  # pylint: disable=protected-access
            _input(1), "eval")
        assert set(features) == {"x"} and labels is not None and len(hooks) == 1
        spec = estimator._call_model_fn(features, labels, "eval", estimator.config)  # pylint: disable=protected-access
        assert isinstance(spec, est.EstimatorSpec) and spec.mode == "eval"
    assert estimator._convert_train_steps_to_hooks(None, None) == []  # pylint: disable=protected-access
    [stop] = estimator._convert_train_steps_to_hooks(5, None)  # pylint: disable=protected-access
    assert isinstance(stop, tf.compat.v1.train.StopAtStepHook)


def test_a_subclass_may_set_the_private_attributes_itself(tmp_path):
    class Early(est.Estimator):
        def __init__(self, **kwargs):
            self._warm_start_settings = "mine"  # AdaNet assigns it before Estimator.__init__
            super().__init__(linear_model_fn, params={"n_classes": 3}, **kwargs)

    assert Early(model_dir=str(tmp_path))._warm_start_settings == "mine"  # pylint: disable=protected-access


def test_private_util_and_gc_helpers_as_2_15_had_them(tmp_path):
    from elastimator.compat import gc, private  # pylint: disable=import-outside-toplevel

    with tf.Graph().as_default():
        features, labels, hooks = private.parse_input_fn_result(
            tf.data.Dataset.from_tensor_slices(({"a": [1, 2]}, [0, 1])))
        assert set(features) == {"a"} and labels is not None and len(hooks) == 1
    assert private.parse_iterator_result({"a": 1}) == ({"a": 1}, None)
    with pytest.raises(ValueError, match="len 2 tuple"):
        private.parse_iterator_result((1, 2, 3))
    assert private.fn_args(lambda features, labels, mode=None: None) == ("features", "labels", "mode")
    for stamp in (100, 200, 300, 400):
        os.makedirs(tmp_path / str(stamp))
    os.makedirs(tmp_path / "temp-500")

    def parser(path):
        name = os.path.basename(path.path)
        return path._replace(export_version=int(name)) if name.isdigit() else None

    paths = gc._get_paths(str(tmp_path), parser)  # pylint: disable=protected-access
    assert [p.export_version for p in paths] == [100, 200, 300, 400]
    doomed = gc._negation(gc._largest_export_versions(2))(paths)  # pylint: disable=protected-access
    assert [p.export_version for p in doomed] == [100, 200]
    assert [p.export_version for p in gc._mod_export_version(200)(paths)] == [200, 400]  # pylint: disable=protected-access

    @private.estimator_export("estimator.experimental.thing")
    def thing():
        return 1

    assert thing() == 1 and thing._estimator_api_names == ("estimator.experimental.thing",)  # pylint: disable=protected-access


def test_the_training_executor_runs_locally_and_asks_its_listener(tmp_path):
    from elastimator.train_eval.executor import (  # pylint: disable=import-outside-toplevel
        _assert_eval_spec, _ContinuousEvalListener, _TrainingExecutor)

    class StopAfterFirst(_ContinuousEvalListener):
        def __init__(self):
            self.results = []

        def after_eval(self, eval_result):
            self.results.append(eval_result)
            return False  # stop training after the first evaluation

    listener = StopAfterFirst()
    estimator = _estimator(tmp_path / "m", save_checkpoints_steps=20)
    executor = _TrainingExecutor(estimator, est.TrainSpec(_input(), max_steps=100),
                                 est.EvalSpec(_input(1), steps=None, throttle_secs=0),
                                 continuous_eval_listener=listener)
    metrics, _ = executor.run()
    assert [(r.status, int(r.metrics["global_step"])) for r in listener.results] == [("evaluated", 20)]
    assert listener.results[0].checkpoint_path.endswith("model.ckpt-20")
    assert metrics["global_step"] < 100  # training stopped early, then evaluated its last checkpoint
    with pytest.raises(TypeError, match="EvalSpec"):
        _assert_eval_spec("not a spec")
