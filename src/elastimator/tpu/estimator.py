"""`TPUEstimator` with `use_tpu=False`: a TPUEstimator program trained, evaluated, predicted with and exported on
CPU or GPU, as tf.estimator 2.15 ran it there.

* `params["batch_size"]` is the global batch size of the mode (`train_batch_size`, `eval_batch_size`,
  `predict_batch_size`), given to input_fn and model_fn; model_fn also gets `params["use_tpu"]` (False).
  An export calls model_fn without a batch size, as 2.15's did.
* model_fn may return a `TPUEstimatorSpec` (its eval_metrics, scaffold_fn and host_call become an
  `EstimatorSpec`'s parts) or an `EstimatorSpec`.
* `use_tpu=True` needs a TPU, which elastimator does not drive: one error says to pass `use_tpu=False`.
* An export holds the CPU graph (`serve`); 2.15 also wrote a graph for TPU serving (`serve, tpu`), which
  needs a TPU to build.
"""

from __future__ import annotations

import logging
from elastimator._validate import is_int
from elastimator.errors import ConfigError, ModelFnError
from elastimator.estimator import Estimator, EstimatorSpec, ModeKeys, check_model_fn, fn_args
from elastimator.tpu.config import RunConfig
from elastimator.tpu.spec import TPUEstimatorSpec

logger = logging.getLogger("elastimator")

_RESERVED_PARAMS = ("batch_size", "use_tpu", "context")
"""Keys TPUEstimator sets in params itself."""


class ExportSavedModelApiVersion:
    """2.15's export API versions (both export the same CPU graph here)."""

    V1 = 1
    V2 = 2


class TPUEstimator(Estimator):
    """An Estimator for TPUEstimator programs, run with `use_tpu=False` on CPU or GPU.

    Args:
        model_fn: `model_fn(features, labels, mode, params, config)` returning a `TPUEstimatorSpec` (or an
            `EstimatorSpec`).
        model_dir, warm_start_from: As for `Estimator`.
        config: A `tf.compat.v1.estimator.tpu.RunConfig` (default: RunConfig()).
        params: Hyperparameters; `batch_size`, `use_tpu` and `context` are TPUEstimator's own keys.
        use_tpu: Must be False here.
        train_batch_size, eval_batch_size, predict_batch_size: The global batch size of each mode, passed as
            `params["batch_size"]` (None: the mode gets no batch size).
        batch_axis, eval_on_tpu, export_to_tpu, export_to_cpu, embedding_config_spec,
            export_saved_model_api_version: TPU settings, accepted and unused off a TPU.
    """

    def __init__(self, model_fn=None, model_dir=None, config=None, params=None, use_tpu=True, train_batch_size=None,
                 eval_batch_size=None, predict_batch_size=None, batch_axis=None, eval_on_tpu=True,
                 export_to_tpu=True, export_to_cpu=True, warm_start_from=None, embedding_config_spec=None,
                 export_saved_model_api_version=ExportSavedModelApiVersion.V1):
        if use_tpu:
            raise ConfigError(
                "TPUEstimator(use_tpu=True) runs on a TPU, which elastimator does not drive. Pass use_tpu=False to "
                "train, evaluate, predict and export on CPU or GPU, as TPUEstimator did without a TPU."
            )
        config = RunConfig() if config is None else config
        if not isinstance(config, RunConfig):
            raise ConfigError(f"TPUEstimator: config must be a tf.compat.v1.estimator.tpu.RunConfig; got "
                              f"{type(config).__name__}.")
        reserved = sorted(set(params or {}) & set(_RESERVED_PARAMS))
        if reserved:
            raise ConfigError(f"TPUEstimator: params {reserved} are TPUEstimator's own keys; rename yours.")
        for name, value in (("train_batch_size", train_batch_size), ("eval_batch_size", eval_batch_size),
                            ("predict_batch_size", predict_batch_size)):
            if value is not None and not is_int(value, minimum=1):
                raise ConfigError(f"TPUEstimator: {name} must be a positive int or None; got {value!r}.")
        if model_fn is None:
            raise ModelFnError("TPUEstimator needs a model_fn.")
        check_model_fn(model_fn, params)
        self._tpu_model_fn = model_fn
        self._batch_sizes = {ModeKeys.TRAIN: train_batch_size, ModeKeys.EVAL: eval_batch_size,
                             ModeKeys.PREDICT: predict_batch_size}
        self._tpu_settings = dict(batch_axis=batch_axis, eval_on_tpu=eval_on_tpu, export_to_tpu=export_to_tpu,
                                  export_to_cpu=export_to_cpu, embedding_config_spec=embedding_config_spec,
                                  export_saved_model_api_version=export_saved_model_api_version)
        super().__init__(self._model_fn_off_tpu, model_dir, config, params, warm_start_from)

    def _params_for(self, mode: str) -> dict:
        params = self.params
        if self._batch_sizes.get(mode) is not None:
            params["batch_size"] = self._batch_sizes[mode]
        return params

    def _model_fn_off_tpu(self, features, labels, mode, params, config):
        params = dict(params, use_tpu=False)
        arguments = {"features": features, "labels": labels, "mode": mode, "params": params, "config": config}
        accepted = fn_args(self._tpu_model_fn)
        spec = self._tpu_model_fn(**{name: value for name, value in arguments.items() if name in accepted})
        if isinstance(spec, TPUEstimatorSpec):
            return spec.as_estimator_spec()
        if isinstance(spec, EstimatorSpec):
            return spec
        raise ModelFnError(f"TPUEstimator: model_fn must return a TPUEstimatorSpec or an EstimatorSpec; got "
                           f"{type(spec).__name__}.")
