"""`SavedModelEstimator`: an Estimator whose model is a SavedModel that an Estimator exported.

tf.estimator 2.15 kept it at `tensorflow_estimator.python.estimator.canned.saved_model_estimator` (never in the
public API, but imported from there). It takes the graphs that `experimental_export_all_saved_models` wrote, one
per mode (tags `train`, `eval`, `serve`), or only the serving one from `export_saved_model`:

* each mode's model_fn imports that mode's graph, with the signature's inputs replaced by what input_fn gave
  (features by key; the labels are the input that is not a feature) and the saved global step by the
  estimator's own;
* TRAIN runs the saved train op on the saved loss; EVAL the saved `metrics/<name>/value` and `update_op`
  pairs (reported as `metrics/<name>`, as 2.15 reported them); PREDICT returns the `serving_default`
  signature's outputs, or the `predict` signature's where there is no default (2.15 refused to predict then);
* variables start from the SavedModel's (global step included) until model_dir has a checkpoint of its own.
"""

from __future__ import annotations

import copy
import os
from typing import Mapping

import tensorflow as tf
from tensorflow.core.framework import variable_pb2
from tensorflow.python.framework import meta_graph as meta_graph_lib  # import with return elements
from tensorflow.python.saved_model import loader_impl

from elastimator.errors import ConfigError, InputFnError
from elastimator.estimator import Estimator, EstimatorSpec, ModeKeys, TRAIN_OP_COLLECTION

_TAGS = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "eval", ModeKeys.PREDICT: "serve"}
_VERBS = {ModeKeys.TRAIN: "train", ModeKeys.EVAL: "evaluate", ModeKeys.PREDICT: "predict"}
_SIGNATURES = {ModeKeys.TRAIN: ("train",), ModeKeys.EVAL: ("eval",), ModeKeys.PREDICT: ("serving_default", "predict")}
_TRAIN_OP_COLLECTIONS = (TRAIN_OP_COLLECTION, tf.compat.v1.GraphKeys.TRAIN_OP)
_LEFT_OUT = {"global_step", "savers", "saved_model_main_op", TRAIN_OP_COLLECTION,
             tf.compat.v1.GraphKeys.TRAIN_OP, tf.compat.v1.GraphKeys.SUMMARIES}
"""Collections not brought into the estimator's graph: the engine makes its own step, saver, init and summaries."""
_METRICS, _PREDICTIONS = "metrics/", "predictions/"
_LABEL_NAMES = ("label", "labels")
"""What a supervised receiver names its labels (a dict of labels keeps its own keys)."""


class ModeNotExportedError(ConfigError, RuntimeError):
    """The SavedModel has no graph for the mode asked for (a RuntimeError, as 2.15 raised)."""


class SavedModelEstimator(Estimator):
    """Trains, evaluates and predicts with the graphs of a SavedModel an Estimator exported.

    Args:
        saved_model_dir: The SavedModel's directory (`.../export/<timestamp>`).
        model_dir: Where new checkpoints go (a temporary directory when None).

    Example:
        >>> export_dir = classifier.experimental_export_all_saved_models(
        ...     "/tmp/export", {ModeKeys.TRAIN: supervised_receiver, ModeKeys.EVAL: supervised_receiver,
        ...                     ModeKeys.PREDICT: serving_receiver})
        >>> estimator = SavedModelEstimator(export_dir)
        >>> estimator.evaluate(input_fn, steps=10)
    """

    def __init__(self, saved_model_dir, model_dir=None):
        saved_model_dir = saved_model_dir.decode() if isinstance(saved_model_dir, bytes) else str(saved_model_dir)
        try:
            saved_model = loader_impl.SavedModelLoader(saved_model_dir).saved_model
        except OSError as error:
            raise ConfigError(f"SavedModelEstimator: no SavedModel at {saved_model_dir!r} ({error}). Pass the "
                              "directory export_saved_model returned.") from error
        self._saved_model_dir = saved_model_dir
        self._meta_graphs = {}
        """Per mode, its graph without the saved global step, and that step's tensor name (see
        `_without_global_step`): made once, imported by every model_fn call of the mode."""
        for meta_graph in saved_model.meta_graphs:
            for mode, tag in _TAGS.items():
                if list(meta_graph.meta_info_def.tags) == [tag]:
                    self._meta_graphs[mode] = _without_global_step(meta_graph)
        if not self._meta_graphs:
            raise ConfigError(f"SavedModelEstimator: {saved_model_dir!r} has no graph tagged 'train', 'eval' or "
                              "'serve'; export it with Estimator.experimental_export_all_saved_models.")
        super().__init__(model_fn=self._model_fn_from_saved_model, model_dir=model_dir)

    @property
    def saved_model_dir(self) -> str:
        return self._saved_model_dir

    def _model_fn_from_saved_model(self, features, labels, mode):
        meta_graph, saved_step = self._meta_graph(mode)
        signature = _signature(meta_graph, mode)
        outputs = {key: value.name for key, value in signature.outputs.items()}
        train_ops = [name for key in _TRAIN_OP_COLLECTIONS if key in meta_graph.collection_def
                     for name in meta_graph.collection_def[key].node_list.value][:1]
        if mode == ModeKeys.TRAIN and not train_ops:
            raise ConfigError(f"SavedModelEstimator: the 'train' graph of {self._saved_model_dir!r} has no train op.")
        global_step = tf.compat.v1.train.get_global_step()
        input_map = _input_map(signature, features, labels)
        if saved_step is not None:
            input_map[saved_step] = global_step.handle
        names = sorted(outputs.values()) + train_ops
        imported = meta_graph_lib.import_scoped_meta_graph_with_return_elements(
            meta_graph, clear_devices=True, input_map=input_map, return_elements=names,
            restore_collections_predicate=lambda key: key not in _LEFT_OUT)[1]
        found = dict(zip(names, imported))
        tensors = {key: found[name] for key, name in outputs.items()}
        scaffold = tf.compat.v1.train.Scaffold(init_fn=self._restore_saved_variables())
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=tensors, scaffold=scaffold)
        predictions = {k[len(_PREDICTIONS):]: v for k, v in tensors.items() if k.startswith(_PREDICTIONS)}
        if mode == ModeKeys.TRAIN:
            return EstimatorSpec(mode, loss=tensors["loss"], train_op=found[train_ops[0]],
                                 predictions=predictions, scaffold=scaffold)
        metrics = {key[:-len("/value")]: (value, tensors[key[:-len("value")] + "update_op"])
                   for key, value in tensors.items() if key.startswith(_METRICS) and key.endswith("/value")}
        return EstimatorSpec(mode, loss=tensors["loss"], eval_metric_ops=metrics, predictions=predictions,
                             scaffold=scaffold)

    def _meta_graph(self, mode: str):
        if mode not in self._meta_graphs:
            raise ModeNotExportedError(
                f"SavedModelEstimator: {self._saved_model_dir!r} has no {_TAGS[mode]!r} graph, so it cannot "
                f"{_VERBS[mode]}; "
                f"it has {sorted(_TAGS[m] for m in self._meta_graphs)}. Export it with "
                "experimental_export_all_saved_models and a receiver for each mode.")
        return self._meta_graphs[mode]

    def _restore_saved_variables(self):
        """The scaffold's init_fn: the SavedModel's variables, for a model_dir without a checkpoint of its own. The
        estimator's global step is among them by name (the imported one was left out of the collections)."""
        path = os.path.join(self._saved_model_dir, "variables", "variables")
        saved = dict(tf.train.list_variables(path))
        variables = {v.op.name: v for v in tf.compat.v1.global_variables() if v.op.name in saved}
        saver = tf.compat.v1.train.Saver(var_list=variables)

        def init_fn(scaffold, session):
            del scaffold
            saver.restore(session, path)
        return init_fn


def _signature(meta_graph, mode: str):
    for key in _SIGNATURES[mode]:
        if key in meta_graph.signature_def:
            return meta_graph.signature_def[key]
    raise ConfigError(f"SavedModelEstimator: the {_TAGS[mode]!r} graph has none of the signatures "
                      f"{list(_SIGNATURES[mode])}; it has {sorted(meta_graph.signature_def)}.")


def _without_global_step(meta_graph):
    """A copy of `meta_graph` without its global step in the variable collections, and the step's tensor name
    (for input_map to put the estimator's own step in its place), or None if it has none."""
    meta_graph = copy.deepcopy(meta_graph)
    step = meta_graph.collection_def.get("global_step")
    if step is None or not step.bytes_list.value:
        return meta_graph, None
    step_def = variable_pb2.VariableDef.FromString(step.bytes_list.value[0])
    for key in (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES):
        if key in meta_graph.collection_def:
            values = meta_graph.collection_def[key].bytes_list.value
            kept = [v for v in values if variable_pb2.VariableDef.FromString(v).variable_name
                    != step_def.variable_name]
            del values[:]
            values.extend(kept)
    return meta_graph, step_def.variable_name


def _input_map(signature, features, labels) -> dict:
    """Signature input tensor name -> the tensor input_fn gave for it."""
    inputs = dict(signature.inputs)
    given = dict(features) if isinstance(features, Mapping) else None
    if given is None:
        names = [name for name in inputs if name not in _LABEL_NAMES]
        if len(names) != 1:
            raise InputFnError(f"SavedModelEstimator: the SavedModel takes features {sorted(names)}; input_fn "
                               "returned one tensor. Return a dict keyed by those names.")
        given = {names[0]: features}
    if labels is not None:
        label_names = [name for name in inputs if name not in given]
        if isinstance(labels, Mapping):
            given.update(labels)
        elif len(label_names) == 1:
            given[label_names[0]] = labels
        elif label_names:
            raise InputFnError(f"SavedModelEstimator: the SavedModel's inputs {label_names} are not among the "
                               f"features {sorted(features)}; which is the label is unclear.")
    missing = sorted(set(inputs) - set(given))
    if missing:
        raise InputFnError(f"SavedModelEstimator: the SavedModel needs inputs {missing}, which input_fn did not "
                           f"return (it returned {sorted(given)}).")
    input_map = {}
    for name, info in inputs.items():
        tensor = given[name]
        dtype = tf.dtypes.as_dtype(info.dtype)
        if isinstance(tensor, tf.SparseTensor) or tensor.dtype != dtype:
            raise InputFnError(f"SavedModelEstimator: input {name!r} must be a dense {dtype.name} tensor, as the "
                               f"SavedModel was exported; input_fn gave "
                               f"{'a SparseTensor' if isinstance(tensor, tf.SparseTensor) else tensor.dtype.name}.")
        input_map[info.name] = tensor
    return input_map
