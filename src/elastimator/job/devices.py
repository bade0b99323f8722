"""The devices a trainer process trains its replicas on: the conf's `replicas_per_worker`.

A synchronous strategy ("mirrored", "multi_worker_mirrored") trains one replica per local device. TensorFlow's
default is every GPU of the process, or the CPU alone where there is none. `replicas_per_worker = N` says how
many instead:

* the first N GPUs where the process has at least N (a worker of a multi-GPU machine that shares it);
* where it has no GPU, N logical devices made of its CPU (`tf.config.set_logical_device_configuration`), which
  is how the several-replicas-per-worker paths (the shard service's reports of each replica's batch, the
  strategy's split of a step) run and are tested on a CPU machine.

`MultiWorkerMirroredStrategy` has no argument for its local devices in a cluster: `multi_worker_mirrored` here
is that strategy with the device list its extended class asks for (`_initialize_local_devices`, a method every
TensorFlow since 2.16 has) answered from N.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.distribute import collective_all_reduce_strategy

from elastimator.errors import ConfError


def local_devices(replicas: int | None) -> tuple[str, ...] | None:
    """The device kind and indices of this process's `replicas` replicas ("GPU:0", ...), or None for the
    strategy's default. Without GPUs, makes its CPU into `replicas` logical devices (before TensorFlow's runtime
    starts; a runtime already started with fewer is a ConfError saying what to change)."""
    if replicas is None:
        return None
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if len(gpus) < replicas:
            raise ConfError(f"conf: 'replicas_per_worker' is {replicas}, and this process sees {len(gpus)} GPU(s). "
                            "Lower it, or give the process more GPUs (CUDA_VISIBLE_DEVICES).")
        return tuple(f"GPU:{i}" for i in range(replicas))
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError:  # the runtime started: its logical devices are fixed
        have = len(tf.config.list_logical_devices("CPU"))
        if have < replicas:
            raise ConfError(
                f"conf: 'replicas_per_worker' is {replicas}, which without a GPU needs as many logical CPU "
                f"devices, and TensorFlow's runtime already started with {have}. Leave the CPU unconfigured "
                "before the job starts (no tf.config calls, no ops run at the conf's import), or set "
                f"'replicas_per_worker' to at most {have}.") from None
    return tuple(f"CPU:{i}" for i in range(replicas))


def mirrored(devices: tuple[str, ...] | None) -> tf.distribute.MirroredStrategy:
    """MirroredStrategy over `devices` (None: every local GPU, or the CPU)."""
    return tf.distribute.MirroredStrategy([f"/device:{d}" for d in devices] if devices else None)


def multi_worker_mirrored(resolver: Any, devices: tuple[str, ...] | None) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy over the cluster `resolver` names (None: TF_CONFIG's), each process training a
    replica on each of `devices` (None: TensorFlow's default; see the module doc)."""
    if devices is None:
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    return _OnDevices(resolver, devices)


class _Extended(collective_all_reduce_strategy.CollectiveAllReduceExtended):
    """The strategy's workings, with this process's replica devices given."""

    def __init__(self, container, resolver, devices: tuple[str, ...]):
        self._given_devices = devices
        super().__init__(container, cluster_resolver=resolver,
                         communication_options=tf.distribute.experimental.CommunicationOptions())

    def _initialize_local_devices(self, cluster_resolver, worker_device):
        kind = self._given_devices[0].split(":")[0]
        return tuple(f"{worker_device}/device:{device}" for device in self._given_devices), kind


class _OnDevices(tf.distribute.MultiWorkerMirroredStrategy):
    """MultiWorkerMirroredStrategy whose processes each train a replica on each of the given devices."""

    def __init__(self, resolver, devices: tuple[str, ...]):  # pylint: disable=super-init-not-called
        # MultiWorkerMirroredStrategy.__init__ makes the stock extended class; its base takes ours.
        tf.distribute.Strategy.__init__(self, _Extended(self, resolver, devices))
