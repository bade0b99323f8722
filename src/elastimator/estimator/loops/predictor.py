"""`Estimator.predictor`: a model loaded once and kept warm for many prediction calls.

`Estimator.predict` builds a graph and restores a checkpoint on every call, as
tf.estimator did, which costs more than the predictions themselves for small
requests. A `Predictor` builds the PREDICT graph once over a serving receiver's
placeholders, restores the checkpoint into one session, and then answers each
call with a single `session.run`. `reload()` picks up a newer checkpoint
without rebuilding anything.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

from elastimator.errors import InputFnError
from elastimator.estimator.contract.mode_keys import ModeKeys
from elastimator.estimator.graph import model_graph
from elastimator.estimator.loops import predict_loop, sessions, warm_graphs
from elastimator.estimator.saving import checkpoints
from elastimator.export.receivers import SERVING_RECEIVERS


class Predictor:
    """Predictions from a restored model, one session run per call.

    Args:
        estimator: The trained Estimator.
        serving_input_receiver_fn: Makes the inputs, as for `export_saved_model`; each call feeds its
            `receiver_tensors` by name.
        checkpoint_path: A checkpoint to load; the newest in model_dir when None.
        predict_keys: The prediction keys to return; all when None.

    Example:
        >>> with estimator.predictor(receiver_fn) as predict:
        ...     scores = predict({"x": batch})["probabilities"]
    """

    def __init__(self, estimator, serving_input_receiver_fn: Callable, checkpoint_path: str | None = None,
                 predict_keys: str | Sequence[str] | None = None):
        self._model_dir, config = estimator.model_dir, estimator.config
        self._checkpoints = checkpoints.CheckpointDir(self._model_dir)  # polled by reload()
        warm_graphs.rest_training(estimator)
        self.checkpoint = checkpoints.resolve_for_reading(checkpoint_path, self._model_dir, "predicting")
        self._graph = tf.Graph()
        with self._graph.as_default():
            receiver = serving_input_receiver_fn()
            if not isinstance(receiver, SERVING_RECEIVERS):
                raise InputFnError(
                    f"serving_input_receiver_fn must return a ServingInputReceiver; got {type(receiver).__name__}. "
                    "Use e.g. elastimator.export.build_raw_serving_input_receiver_fn(...)."
                )
            built = model_graph.build(model_fn=model_graph.model_fn_of(estimator), params=estimator.params,
                                      config=config, mode=ModeKeys.PREDICT, features=receiver.features,
                                      place_on_cluster=False)
            self._inputs = dict(receiver.receiver_tensors)
            self._outputs = predict_loop.select(built.spec.predictions, predict_keys)
            scaffold = sessions.make_scaffold(built.spec, config)
            scaffold.finalize()
            self._saver = scaffold.saver
            self._session = tf.compat.v1.Session(graph=self._graph, config=config.effective_session_config())
            self._session.run(scaffold.init_op)
            self._session.run(scaffold.local_init_op)
            if self.checkpoint is None and scaffold.init_fn is not None:
                scaffold.init_fn(self._session)
            self._restore(self.checkpoint)
        self._graph.finalize()

    @property
    def input_names(self) -> list[str]:
        """The names each call's inputs are fed by."""
        return sorted(self._inputs)

    def __call__(self, inputs: Mapping[str, Any]) -> Any:
        """Predictions (numpy arrays, in the model's structure) for a batch of `inputs` keyed by input name."""
        missing = sorted(set(self._inputs) - set(inputs))
        unknown = sorted(set(inputs) - set(self._inputs))
        if missing or unknown:
            raise InputFnError(
                f"Predictor inputs must be exactly {self.input_names}; missing {missing}, unknown {unknown}.")
        feed = {self._inputs[name]: np.asarray(value) for name, value in inputs.items()}
        return self._session.run(self._outputs, feed_dict=feed)

    def reload(self) -> bool:
        """Restores the newest checkpoint of model_dir if it is newer than the loaded one; returns whether it did."""
        latest = self._checkpoints.newest()
        if latest is None or latest == self.checkpoint:
            return False
        self._restore(latest)
        return True

    def _restore(self, checkpoint: str | None) -> None:
        if checkpoint is not None:
            with self._graph.as_default():
                self._saver.restore(self._session, checkpoint)
        self.checkpoint = checkpoint

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> "Predictor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
