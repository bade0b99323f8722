"""`Estimator.predict`: a generator of predictions."""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

import tensorflow as tf

from elastimator.errors import ModelFnError
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import model_graph
from elastimator.estimator.loops import hooked_session, sessions
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
    model_dir, config = estimator.model_dir, estimator.config
    checkpoint = checkpoints.resolve_for_reading(checkpoint_path, model_dir, "predicting")
    with tf.Graph().as_default():
        built = model_graph.build_for(estimator, ModeKeys.PREDICT, input_fn)
        predictions = select(built.spec.predictions, predict_keys)
        creator = sessions.restoring_session_creator(built.spec, config, checkpoint, config.master)
        all_hooks = list(built.input_hooks) + user_hooks + list(built.spec.prediction_hooks)
        with hooked_session.ReusingMonitoredSession(creator, all_hooks) as session:
            while not session.should_stop():
                batch = session.run(predictions)
                if not yield_single_examples:
                    yield batch
                    continue
                for i in range(_batch_size(batch)):
                    if isinstance(batch, dict):
                        yield {key: value[i] for key, value in batch.items()}
                    else:
                        yield batch[i]
