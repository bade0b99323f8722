"""`TPUConfig`, `InputPipelineConfig` and the TPU `RunConfig`: what TPUEstimator programs configure.

elastimator runs TPUEstimator programs with `use_tpu=False`, on CPU or GPU, as
tf.estimator 2.15 did; these classes take 2.15's arguments, so such programs
construct their configs unedited. The TPU-only settings (shards, cores per
replica, infeed) are kept and read back, and change nothing off a TPU.
"""

from __future__ import annotations

from elastimator._records import record_type
from elastimator._validate import is_int
from elastimator.errors import ConfigError
from elastimator.estimator import RunConfig as _RunConfig


class InputPipelineConfig:
    """How a TPU host fed its cores (names only; off a TPU every input is per host)."""

    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


_TPU_FIELDS = ("iterations_per_loop", "num_shards", "num_cores_per_replica", "per_host_input_for_training",
               "tpu_job_name", "initial_infeed_sleep_secs", "input_partition_dims",
               "eval_training_input_configuration", "experimental_host_call_every_n_steps",
               "experimental_allow_per_host_v2_parallel_get_next", "experimental_feed_hook")


class TPUConfig(record_type("TPUConfig", _TPU_FIELDS)):
    """TPU settings of a `RunConfig`, with 2.15's fields and defaults.

    Off a TPU, `iterations_per_loop` does not change what hooks see: training runs as an Estimator's does
    (several steps per session call only where no hook would notice; see elastimator.estimator.step.steps_per_call).
    """

    __slots__ = ()

    def __new__(cls, iterations_per_loop=2, num_shards=None, num_cores_per_replica=None,
                per_host_input_for_training=True, tpu_job_name=None, initial_infeed_sleep_secs=None,
                input_partition_dims=None, eval_training_input_configuration=InputPipelineConfig.PER_HOST_V1,
                experimental_host_call_every_n_steps=1, experimental_allow_per_host_v2_parallel_get_next=False,
                experimental_feed_hook=None):
        if not (is_int(iterations_per_loop, minimum=1) or _is_duration(iterations_per_loop)):
            raise ConfigError(f"TPUConfig: iterations_per_loop must be a positive int or a duration such as '30s'; "
                              f"got {iterations_per_loop!r}.")
        for name, value in (("num_shards", num_shards), ("num_cores_per_replica", num_cores_per_replica)):
            if value is not None and not is_int(value, minimum=1):
                raise ConfigError(f"TPUConfig: {name} must be a positive int or None; got {value!r}.")
        return super().__new__(cls, iterations_per_loop, num_shards, num_cores_per_replica,
                               per_host_input_for_training, tpu_job_name, initial_infeed_sleep_secs,
                               input_partition_dims, eval_training_input_configuration,
                               experimental_host_call_every_n_steps,
                               experimental_allow_per_host_v2_parallel_get_next, experimental_feed_hook)


def _is_duration(value) -> bool:
    """'30s', '5m', '1h': 2.15 also took iterations_per_loop as a time per loop."""
    return isinstance(value, str) and value[-1:] in ("s", "m", "h") and value[:-1].replace(".", "", 1).isdigit()


class RunConfig(_RunConfig):
    """`tf.compat.v1.estimator.tpu.RunConfig`: an elastimator `RunConfig` plus `tpu_config`.

    Args:
        tpu_config: A `TPUConfig` (default: TPUConfig()).
        evaluation_master, master: Session targets; None keeps the ones TF_CONFIG gives (local by default).
        cluster: A TPU cluster resolver; kept, and unused off a TPU.
        **kwargs: Every `RunConfig` argument.
    """

    def __init__(self, tpu_config=None, evaluation_master=None, master=None, cluster=None, **kwargs):
        super().__init__(**kwargs)
        if tpu_config is not None and not isinstance(tpu_config, TPUConfig):
            raise ConfigError(f"RunConfig: tpu_config must be a TPUConfig; got {type(tpu_config).__name__}.")
        extra = {"tpu_config": tpu_config or TPUConfig(), "evaluation_master": evaluation_master,
                 "master": master, "cluster": cluster}
        object.__setattr__(self, "_tpu", extra)

    @property
    def tpu_config(self) -> TPUConfig:
        return self._tpu["tpu_config"]

    @property
    def master(self) -> str:
        return self._tpu["master"] if self._tpu["master"] is not None else self.cluster.master

    @property
    def evaluation_master(self) -> str:
        given = self._tpu["evaluation_master"]
        return given if given is not None else self.cluster.evaluation_master

    @property
    def tpu_cluster(self):
        """The `cluster` argument (a TPU cluster resolver), unused off a TPU."""
        return self._tpu["cluster"]

    def replace(self, **kwargs) -> "RunConfig":
        """A copy with the fields in `kwargs` changed; `tpu_config` may be among them."""
        extra = {key: kwargs.pop(key) if key in kwargs else value for key, value in self._tpu.items()}
        replaced = super().replace(**kwargs)
        object.__setattr__(replaced, "_tpu", extra)
        return replaced
