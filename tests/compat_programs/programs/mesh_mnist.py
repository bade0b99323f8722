"""mesh-tensorflow's MNIST Estimator (the pattern of its `examples/mnist.py`): a model written in `mtf` dimensions
(images in 4x4 blocks of 7x7, block convolutions, dense layers), laid out on a 2x2 CPU mesh of placement devices and
lowered to TensorFlow, an Adafactor update from `mtf.gradients`, an `MtfRestoreHook` that copies the variables into
their slices after the session starts (in every mode), and the user's own `CheckpointSaverHook` with a sharded
Saver kept in the SAVERS collection and an `MtfCheckpointSaverListener`. Trained and evaluated in turns, then used
to predict; on generated 28x28 images of 10 classes (a bright square at the class's place). Prints `RESULT {json}`.
"""
import json
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import ops

# A user fix mesh-tensorflow 0.1.21 needs on TensorFlow 2.15 as well (not tf.estimator's): its tpu_variables module
# registers a conversion through ops.register_tensor_conversion_function, which TensorFlow moved out of `ops`.
if not hasattr(ops, "register_tensor_conversion_function"):
    ops.register_tensor_conversion_function = tf.register_tensor_conversion_function
import mesh_tensorflow as mtf  # noqa: E402  (after the fix above)

BATCH, HIDDEN, MESH_SHAPE, LAYOUT = 32, 32, "b1:2;b2:2", "row_blocks:b1;col_blocks:b2"
rng = np.random.RandomState(0)
CLASSES = rng.randint(0, 10, size=640).astype("int32")
IMAGES = (0.3 * rng.rand(640, 28, 28)).astype("float32")
for _i, _label in enumerate(CLASSES):
    _row, _col = divmod(int(_label), 4)
    IMAGES[_i, 7 * _row + 1:7 * _row + 6, 7 * _col + 1:7 * _col + 6] += 0.7
IMAGES = IMAGES.reshape(640, 784)


def mnist_model(image, labels, mesh):
    """(logits, loss) as mtf tensors: logits [batch, classes], loss [] (None without labels)."""
    batch_dim = mtf.Dimension("batch", BATCH)
    row_blocks_dim, col_blocks_dim = mtf.Dimension("row_blocks", 4), mtf.Dimension("col_blocks", 4)
    rows_dim, cols_dim = mtf.Dimension("rows_size", 7), mtf.Dimension("cols_size", 7)
    classes_dim, one_channel_dim = mtf.Dimension("classes", 10), mtf.Dimension("one_channel", 1)
    x = mtf.import_tf_tensor(mesh, tf.reshape(image, [BATCH, 4, 7, 4, 7, 1]), mtf.Shape(
        [batch_dim, row_blocks_dim, rows_dim, col_blocks_dim, cols_dim, one_channel_dim]))
    x = mtf.transpose(x, [batch_dim, row_blocks_dim, col_blocks_dim, rows_dim, cols_dim, one_channel_dim])
    filters_dim = mtf.Dimension("filters", 4)
    x = mtf.relu(mtf.layers.conv2d_with_blocks(
        x, filters_dim, filter_size=[3, 3], strides=[1, 1], padding="SAME",
        h_blocks_dim=row_blocks_dim, w_blocks_dim=col_blocks_dim, name="conv0"))
    x = mtf.reduce_mean(x, reduced_dim=filters_dim)
    hidden = mtf.layers.dense(x, mtf.Dimension("hidden1", HIDDEN), reduced_dims=x.shape.dims[-4:],
                              activation=mtf.relu, name="hidden1")
    logits = mtf.layers.dense(hidden, classes_dim, name="logits")
    if labels is None:
        return logits, None
    labels = mtf.import_tf_tensor(mesh, tf.reshape(labels, [BATCH]), mtf.Shape([batch_dim]))
    loss = mtf.layers.softmax_cross_entropy_with_logits(logits, mtf.one_hot(labels, classes_dim), classes_dim)
    return logits, mtf.reduce_mean(loss)


def model_fn(features, labels, mode, params, config):
    del params
    global_step = tf.train.get_global_step()
    graph = mtf.Graph()
    mesh = mtf.Mesh(graph, "my_mesh")
    logits, loss = mnist_model(features, labels, mesh)
    mesh_shape = mtf.convert_to_shape(MESH_SHAPE)
    mesh_impl = mtf.placement_mesh_impl.PlacementMeshImpl(
        mesh_shape, mtf.convert_to_layout_rules(LAYOUT), [""] * mesh_shape.size)
    if mode == tf.estimator.ModeKeys.TRAIN:
        var_grads = mtf.gradients([loss], [v.outputs[0] for v in graph.trainable_variables])
        update_ops = mtf.optimize.AdafactorOptimizer().apply_grads(var_grads, graph.trainable_variables)
    lowering = mtf.Lowering(graph, {mesh: mesh_impl})
    restore_hook = mtf.MtfRestoreHook(lowering)
    tf_logits = lowering.export_to_tf_tensor(logits)
    if mode != tf.estimator.ModeKeys.PREDICT:
        tf_loss = lowering.export_to_tf_tensor(loss)
        tf.summary.scalar("loss", tf_loss)
    if mode == tf.estimator.ModeKeys.TRAIN:
        tf_update_ops = [lowering.lowered_operation(op) for op in update_ops]
        tf_update_ops.append(tf.assign_add(global_step, 1))
        saver = tf.train.Saver(tf.global_variables(), sharded=True, max_to_keep=10, keep_checkpoint_every_n_hours=2,
                               defer_build=False, save_relative_paths=True)
        tf.add_to_collection(tf.GraphKeys.SAVERS, saver)
        saver_hook = tf.train.CheckpointSaverHook(config.model_dir, save_steps=40, saver=saver,
                                                  listeners=[mtf.MtfCheckpointSaverListener(lowering)])
        accuracy = tf.metrics.accuracy(labels=labels, predictions=tf.argmax(tf_logits, axis=1))
        tf.summary.scalar("train_accuracy", accuracy[1])
        # The restore hook comes before the saver hook.
        return tf.estimator.EstimatorSpec(mode, loss=tf_loss, train_op=tf.group(tf_update_ops),
                                          training_chief_hooks=[restore_hook, saver_hook])
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"classes": tf.argmax(tf_logits, axis=1), "probabilities": tf.nn.softmax(tf_logits)}
        return tf.estimator.EstimatorSpec(mode, predictions=predictions, prediction_hooks=[restore_hook],
                                          export_outputs={"classify": tf.estimator.export.PredictOutput(predictions)})
    return tf.estimator.EstimatorSpec(mode, loss=tf_loss, evaluation_hooks=[restore_hook], eval_metric_ops={
        "accuracy": tf.metrics.accuracy(labels=labels, predictions=tf.argmax(tf_logits, axis=1))})


def train_input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((IMAGES[:512], CLASSES[:512]))
    return dataset.cache().shuffle(512, seed=1).batch(BATCH, drop_remainder=True).repeat(2)


def eval_input_fn():
    dataset = tf.data.Dataset.from_tensor_slices((IMAGES[512:], CLASSES[512:])).batch(BATCH, drop_remainder=True)
    return tf.data.make_one_shot_iterator(dataset).get_next()


def predict_input_fn():
    return tf.data.Dataset.from_tensor_slices(IMAGES[512:]).batch(BATCH, drop_remainder=True)


def main(model_dir):
    classifier = tf.estimator.Estimator(model_fn=model_fn, model_dir=model_dir,
                                        config=tf.estimator.RunConfig(tf_random_seed=5))
    evaluations = []
    for _ in range(2):  # train an epoch pair, evaluate, as the example's loop
        classifier.train(input_fn=train_input_fn)
        evaluations.append({k: float(v) for k, v in classifier.evaluate(input_fn=eval_input_fn).items()})
    predictions = list(classifier.predict(predict_input_fn))
    state = tf.train.get_checkpoint_state(model_dir)
    print("RESULT " + json.dumps({
        "evaluations": evaluations,
        "prediction_keys": sorted(predictions[0]),
        "prediction_shapes": {k: list(np.shape(v)) for k, v in predictions[0].items()},
        "predicted_accuracy": float(np.mean([p["classes"] for p in predictions] == CLASSES[512:])),
        "checkpoints": [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        "checkpoint_files": sorted(f for f in os.listdir(model_dir)  # the sharded Saver's files of the last one
                                   if f.startswith(os.path.basename(state.model_checkpoint_path) + ".")),
        "variables": sorted(classifier.get_variable_names()),
    }, sort_keys=True))


if __name__ == "__main__":
    tf.disable_v2_behavior()
    main(sys.argv[1])
