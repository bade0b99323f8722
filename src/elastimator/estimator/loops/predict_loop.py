"""`Estimator.predict`: a generator of predictions."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import tensorflow as tf

from elastimator.errors import ModelFnError
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import model_graph
from elastimator.estimator.loops import hooked_session, sessions, warm_graphs
from elastimator.estimator.loops import hooks as engine_hooks
from elastimator.estimator.saving import checkpoints


def select(predictions, predict_keys):
    """The predictions named by `predict_keys` (all when None)."""
    if predict_keys is None:
        return predictions
    keys = [predict_keys] if isinstance(predict_keys, str) else list(predict_keys)
    if not isinstance(predictions, dict):
        raise ModelFnError(
            f"predict_keys={keys} was given, but model_fn returned a single predictions tensor, not a dict. "
            "Return predictions as a dict, or leave predict_keys unset."
        )
    unknown = [k for k in keys if k not in predictions]
    if unknown:
        raise ModelFnError(
            f"predict_keys {unknown} are not among the model's predictions {sorted(predictions)}. "
            "Pass some of those keys, or None for all."
        )
    return {k: predictions[k] for k in keys}


def _batch_size(predictions) -> int:
    tensors = predictions if isinstance(predictions, dict) else {"predictions": predictions}
    sizes = {k: v.shape[0] for k, v in tensors.items()}
    if len(set(sizes.values())) > 1:
        raise ModelFnError(
            f"yield_single_examples=True needs every prediction to share its first (batch) dimension; got "
            f"{sizes}. Use yield_single_examples=False to get whole batches."
        )
    return next(iter(sizes.values()))


def predict(
    estimator,
    input_fn: Callable,
    predict_keys: str | Sequence[str] | None = None,
    hooks: Sequence | None = None,
    checkpoint_path: str | None = None,
    yield_single_examples: bool = True,
) -> Iterator:
    """Yields predictions for every example (or batch) `input_fn` produces."""
    user_hooks = engine_hooks.check_hooks("hooks", hooks)
    warm_graphs.rest_training(estimator)
    checkpoint = checkpoints.resolve_for_reading(checkpoint_path, estimator.model_dir, "predicting")
    reuse = warm_graphs.reuse_for(estimator, ModeKeys.PREDICT, user_hooks, checkpoint, _named(predict_keys))
    warm = reuse.warm(input_fn, checkpoint) if reuse else None
    if warm is not None:
        batches = _kept_batches(reuse.graphs, warm)
    else:
        batches = _batches_built(estimator, input_fn, predict_keys, user_hooks, checkpoint, reuse)
    for batch in batches:
        if yield_single_examples:
            yield from _examples(batch)
        else:
            yield batch


def _named(predict_keys) -> tuple | None:
    return None if predict_keys is None else tuple([predict_keys] if isinstance(predict_keys, str) else predict_keys)


def _examples(batch) -> Iterator:
    """A batch's predictions one example at a time: rows of each array (a dict of them per example)."""
    _batch_size(batch)
    if not isinstance(batch, dict):
        yield from batch
        return
    keys = list(batch)
    for row in zip(*batch.values()):
        yield dict(zip(keys, row))


def _batches_built(estimator, input_fn, predict_keys, user_hooks, checkpoint, reuse) -> Iterator:
    """Builds the prediction graph and yields its batches from a monitored session, or keeps it (`warm_graphs`)."""
    config = estimator.config
    with tf.Graph().as_default():
        built = model_graph.build_for(estimator, ModeKeys.PREDICT, input_fn)
        predictions = select(built.spec.predictions, predict_keys)
        scaffold = sessions.make_scaffold(built.spec, config, ready_once_made=True)
        warm = reuse.keep(built, scaffold, checkpoint, config.master, {"batch": predictions},
                          built.spec.prediction_hooks) if reuse else None
        if warm is not None:
            yield from _kept_batches(reuse.graphs, warm)
            return
        creator = sessions.restoring_session_creator(built.spec, config, checkpoint, config.master, scaffold)
        all_hooks = list(built.input_hooks) + user_hooks + list(built.spec.prediction_hooks)
        with hooked_session.ReusingMonitoredSession(creator, all_hooks) as session:
            while not session.should_stop():
                yield session.run(predictions)


def _kept_batches(graphs, warm) -> Iterator:
    """Yields the batches of a kept graph (its input started, its checkpoint restored), then keeps it again; so
    does a caller that stops reading early."""
    with graphs.in_use(warm):
        yield from warm_graphs.batches(warm, "batch")
