"""EstimatorSpec validation per mode."""

import pytest
import tensorflow as tf

from elastimator import EstimatorSpec, ModeKeys, ModelFnError
from elastimator.export import ClassificationOutput, PredictOutput


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def _train_parts():
    w = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.ones_initializer())
    loss = tf.square(w)
    return loss, tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)


def test_train_needs_loss_and_train_op(graph):
    loss, train_op = _train_parts()
    spec = EstimatorSpec(ModeKeys.TRAIN, loss=loss, train_op=train_op)
    assert spec.train_op is train_op and spec.loss is loss
    with pytest.raises(ModelFnError, match="loss is required in TRAIN mode"):
        EstimatorSpec(ModeKeys.TRAIN, train_op=train_op)
    with pytest.raises(ModelFnError, match="train_op is required in TRAIN mode.*minimize"):
        EstimatorSpec(ModeKeys.TRAIN, loss=loss)


def test_eval_needs_loss_and_predict_needs_predictions(graph):
    with pytest.raises(ModelFnError, match="loss is required in EVAL mode"):
        EstimatorSpec(ModeKeys.EVAL, predictions=tf.constant([1.0]))
    with pytest.raises(ModelFnError, match="predictions are required in PREDICT mode"):
        EstimatorSpec(ModeKeys.PREDICT, loss=tf.constant(1.0))


def test_loss_of_shape_one_becomes_scalar_and_vectors_are_refused(graph):
    spec = EstimatorSpec(ModeKeys.EVAL, loss=tf.constant([2.0]))
    assert spec.loss.shape.rank == 0
    with pytest.raises(ModelFnError, match=r"loss must be a scalar.*got shape \(3,\).*reduce_mean"):
        EstimatorSpec(ModeKeys.EVAL, loss=tf.constant([1.0, 2.0, 3.0]))
    # Anything tensor-like is converted, as tf.estimator 2.15 converted it: a number, a variable.
    assert EstimatorSpec(ModeKeys.EVAL, loss=1.0).loss.dtype == tf.float32
    with pytest.raises(ModelFnError, match="loss must be a tensor or convertible to one.*got object") as error:
        EstimatorSpec(ModeKeys.EVAL, loss=object())
    with pytest.raises(ModelFnError, match="loss must be a numeric scalar tensor; got .*dtype=string"):
        EstimatorSpec(ModeKeys.EVAL, loss="one")
    assert isinstance(error.value, TypeError) and isinstance(error.value, ValueError)  # both 2.15's types


def test_tensors_from_another_graph_are_refused(graph):
    with tf.Graph().as_default():
        foreign = tf.constant(1.0)
    with pytest.raises(ModelFnError, match="belongs to another graph.*inside model_fn"):
        EstimatorSpec(ModeKeys.EVAL, loss=foreign)


def test_unknown_mode_and_bad_prediction_types(graph):
    with pytest.raises(ModelFnError, match="mode must be one of"):
        EstimatorSpec("training", loss=tf.constant(1.0))
    with pytest.raises(ModelFnError, match=r"predictions\['a'\] must be a tensor or convertible.*got object"):
        EstimatorSpec(ModeKeys.PREDICT, predictions={"a": object()})


def test_predictions_may_be_variables_and_arrays_as_in_2_15(graph):
    variable = tf.compat.v1.Variable([1.0, 2.0], name="v")
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"v": variable, "a": [1, 2]})
    assert spec.predictions["v"].dtype == tf.float32 and spec.predictions["a"].dtype == tf.int32
    assert isinstance(spec, tuple) and spec._fields[:3] == ("mode", "predictions", "loss")
    with pytest.raises(ModelFnError, match="the mode cannot change"):
        spec._replace(mode=ModeKeys.EVAL)


def test_eval_metric_ops_must_be_value_update_pairs(graph):
    labels, preds = tf.constant([1, 0]), tf.constant([1, 1])
    good = EstimatorSpec(ModeKeys.EVAL, loss=tf.constant(1.0),
                         eval_metric_ops={"acc": tf.compat.v1.metrics.accuracy(labels, preds)})
    assert set(good.eval_metric_ops) == {"acc"}
    with pytest.raises(ModelFnError, match=r"eval_metric_ops\['acc'\] must be a \(value_tensor, update_op\) pair"):
        EstimatorSpec(ModeKeys.EVAL, loss=tf.constant(1.0), eval_metric_ops={"acc": tf.constant(1.0)})


def test_export_outputs_default_to_predictions(graph):
    predictions = {"y": tf.constant([1.0])}
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=predictions)
    (key, output), = spec.export_outputs.items()
    assert key == "serving_default" and isinstance(output, PredictOutput)
    assert output.outputs == predictions


def test_single_export_output_is_also_the_default(graph):
    scores = tf.constant([[0.2, 0.8]])
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=scores, export_outputs={"cls": ClassificationOutput(scores)})
    assert set(spec.export_outputs) == {"cls", "serving_default"}
    with pytest.raises(ModelFnError, match="no 'serving_default'"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=scores, export_outputs={
            "a": PredictOutput(scores), "b": PredictOutput(scores)})
    with pytest.raises(ModelFnError, match=r"export_outputs\['a'\] must be a PredictOutput"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=scores, export_outputs={"a": scores})


def test_hooks_must_be_session_run_hooks(graph):
    with pytest.raises(ModelFnError, match="training_hooks must be tf.compat.v1.train.SessionRunHook"):
        EstimatorSpec(ModeKeys.EVAL, loss=tf.constant(1.0), training_hooks=[object()])


def test_replace_revalidates(graph):
    spec = EstimatorSpec(ModeKeys.EVAL, loss=tf.constant(1.0))
    with pytest.raises(ModelFnError, match="loss is required"):
        spec._replace(loss=None)


def test_train_op_may_be_an_assign_on_a_resource_variable(graph):
    step = tf.compat.v1.train.get_or_create_global_step()
    spec = EstimatorSpec(ModeKeys.TRAIN, loss=tf.constant(1.0), train_op=tf.compat.v1.assign_add(step, 1))
    assert isinstance(spec.train_op, tf.Operation)
