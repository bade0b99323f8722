"""`Estimator.export_saved_model`: a SavedModel for TF Serving and `tf.saved_model.load`."""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Callable, Mapping

import tensorflow as tf

from elastimator.errors import ExportError
from elastimator.estimator import log_lines
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import model_graph
from elastimator.estimator.loops import warm_graphs
from elastimator.estimator.saving import checkpoints
from elastimator.export.outputs import EvalOutput, TrainOutput
from elastimator.export.receivers import SERVING_RECEIVERS, SupervisedInputReceiver

logger = logging.getLogger("elastimator")

_TAGS = {
    ModeKeys.PREDICT: [tf.compat.v1.saved_model.tag_constants.SERVING],
    ModeKeys.TRAIN: [tf.compat.v1.saved_model.tag_constants.TRAINING],
    ModeKeys.EVAL: ["eval"],
}

TRAIN_OP_COLLECTION = "saved_model_train_op"
"""The collection of a TRAIN graph's train op, as tf.estimator named it."""


def _receiver(serving_input_receiver_fn: Callable, mode: str):
    if not callable(serving_input_receiver_fn):
        raise ExportError(
            f"serving_input_receiver_fn must be callable; got {type(serving_input_receiver_fn).__name__}. "
            "Use e.g. elastimator.export.build_raw_serving_input_receiver_fn(...)."
        )
    receiver = serving_input_receiver_fn()
    expected = SERVING_RECEIVERS if mode == ModeKeys.PREDICT else (SupervisedInputReceiver,)
    if not isinstance(receiver, expected):
        raise ExportError(
            f"serving_input_receiver_fn must return a {expected[0].__name__} for experimental_mode={mode!r}; "
            f"got {type(receiver).__name__}."
        )
    return receiver


def _signatures(spec, receiver, mode: str) -> dict:
    if mode == ModeKeys.TRAIN:
        return {"train": TrainOutput(spec.loss, spec.predictions).as_signature_def(receiver.receiver_tensors)}
    if mode == ModeKeys.EVAL:
        output = EvalOutput(spec.loss, spec.predictions, spec.eval_metric_ops)
        return {"eval": output.as_signature_def(receiver.receiver_tensors)}
    signatures = {key: out.as_signature_def(receiver.receiver_tensors) for key, out in spec.export_outputs.items()}
    for alt_name, alt_tensors in receiver.receiver_tensors_alternatives.items():
        for key, out in spec.export_outputs.items():
            signatures[f"{key}:{alt_name}"] = out.as_signature_def(alt_tensors)
    return signatures


def _unique_export_dir(export_dir_base: str) -> str:
    stamp = int(time.time())
    while tf.io.gfile.exists(os.path.join(export_dir_base, str(stamp))):
        stamp += 1
    return os.path.join(export_dir_base, str(stamp))


def _copy_assets_extra(assets_extra: Mapping[str, str], export_dir: str) -> None:
    for dest, source in assets_extra.items():
        if not tf.io.gfile.exists(source):
            raise ExportError(f"assets_extra[{dest!r}] = {source!r} does not exist; expected a file to copy.")
        target = os.path.join(export_dir, "assets.extra", dest)
        tf.io.gfile.makedirs(os.path.dirname(target))
        tf.io.gfile.copy(source, target, overwrite=True)


def export_saved_model(
    estimator,
    export_dir_base: str,
    serving_input_receiver_fn: Callable,
    assets_extra: Mapping[str, str] | None = None,
    as_text: bool = False,
    checkpoint_path: str | None = None,
    experimental_mode: str = ModeKeys.PREDICT,
    strip_default_attrs: bool = True,
) -> bytes:
    """Writes a SavedModel of one mode to `export_dir_base/<timestamp>/` and returns that path (bytes).

    The model is rebuilt in `experimental_mode` (PREDICT by default) over the
    serving receiver's tensors, its variables are restored from the newest (or
    the given) checkpoint, and the result is written to a temporary directory
    that is renamed into place, so a reader never sees half an export.
    """
    if experimental_mode not in _TAGS:
        raise ExportError(f"experimental_mode must be one of {list(_TAGS)}; got {experimental_mode!r}.")
    return export_all_saved_models(estimator, export_dir_base, {experimental_mode: serving_input_receiver_fn},
                                   assets_extra, as_text, checkpoint_path, strip_default_attrs)


def export_all_saved_models(
    estimator,
    export_dir_base: str,
    input_receiver_fn_map: Mapping[str, Callable],
    assets_extra: Mapping[str, str] | None = None,
    as_text: bool = False,
    checkpoint_path: str | None = None,
    strip_default_attrs: bool = True,
) -> bytes:
    """Writes one SavedModel with a MetaGraph per mode in `input_receiver_fn_map` (TRAIN, EVAL and PREDICT, each
    tagged as tf.estimator tagged it), sharing one copy of the variables; returns its path (bytes)."""
    unknown = sorted(set(input_receiver_fn_map) - set(_TAGS))
    if not input_receiver_fn_map or unknown:
        raise ExportError(f"input_receiver_fn_map must map some of {list(_TAGS)} to receiver fns; got "
                          f"{sorted(input_receiver_fn_map)}.")
    model_dir = estimator.model_dir
    checkpoint = checkpoints.resolve(checkpoint_path, model_dir)
    if checkpoint is None:
        raise ExportError(
            f"No checkpoint in model_dir {model_dir!r} to export. Train the estimator first, or pass "
            "checkpoint_path."
        )
    warm_graphs.rest_training(estimator)
    export_dir = _unique_export_dir(export_dir_base)
    temp_dir = os.path.join(export_dir_base, f"temp-{os.path.basename(export_dir)}")
    if tf.io.gfile.exists(temp_dir):
        tf.io.gfile.rmtree(temp_dir)
    modes = [mode for mode in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) if mode in input_receiver_fn_map]
    try:  # a failed export (a receiver or model_fn that raises) leaves nothing behind
        builder = tf.compat.v1.saved_model.Builder(temp_dir)
        for index, mode in enumerate(modes):
            _add_meta_graph(builder, estimator, mode, input_receiver_fn_map[mode], checkpoint,
                            with_variables=index == 0, strip_default_attrs=strip_default_attrs)
        builder.save(as_text=as_text)
        if assets_extra:
            _copy_assets_extra(assets_extra, temp_dir)
        tf.io.gfile.rename(temp_dir, export_dir)
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    logger.info("Exported %s (from %s) to %s", "/".join(modes), checkpoint, export_dir)
    return export_dir.encode()


def _local_init_op(scaffold):
    """What a loaded SavedModel runs first: the model's own `local_init_op` where its scaffold has one (as
    tf.estimator exported it), or the local variables' and tables' initializers."""
    if scaffold is not None and scaffold.local_init_op is not None:
        return scaffold.local_init_op
    return tf.group(tf.compat.v1.local_variables_initializer(), tf.compat.v1.tables_initializer())


def _add_meta_graph(builder, estimator, mode: str, receiver_fn: Callable, checkpoint: str, *, with_variables: bool,
                    strip_default_attrs: bool) -> None:
    """Builds the model in `mode` over its receiver and adds that graph to `builder` (with the variables, restored
    from `checkpoint`, for the first graph)."""
    with tf.Graph().as_default() as graph:
        receiver = _receiver(receiver_fn, mode)
        built = model_graph.build(
            model_fn=model_graph.model_fn_of(estimator), params=estimator.params, config=estimator.config, mode=mode,
            features=receiver.features, labels=receiver.labels, place_on_cluster=False,
        )
        signature_defs = _signatures(built.spec, receiver, mode)
        log_lines.signatures_included(signature_defs)
        options = dict(signature_def_map=signature_defs,
                       assets_collection=graph.get_collection(tf.compat.v1.GraphKeys.ASSET_FILEPATHS),
                       main_op=_local_init_op(built.spec.scaffold),
                       strip_default_attrs=strip_default_attrs, clear_devices=True)
        if mode == ModeKeys.TRAIN:  # where tf.estimator put it, for SavedModelEstimator and other readers
            graph.add_to_collection(TRAIN_OP_COLLECTION, built.spec.train_op)
        saver = built.spec.scaffold.saver if built.spec.scaffold is not None else None
        if saver is None:
            saver = checkpoints.make_saver(estimator.config)
            saver.build()
        if not with_variables:
            builder.add_meta_graph(_TAGS[mode], saver=saver, **options)
            return
        with tf.compat.v1.Session(graph=graph, config=tf.compat.v1.ConfigProto(allow_soft_placement=True)) as session:
            saver.restore(session, checkpoint)
            builder.add_meta_graph_and_variables(session, _TAGS[mode], saver=saver, **options)
