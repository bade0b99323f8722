"""Autoscaling a parameter-server job's workers on Kubernetes, from inside the cluster.

The same policy as the local launcher's (`autoscale.decide`, decisions as data) runs in the chief: every
`every_secs` it measures the job's global steps/s from the chief's own summaries, asks the policy, and where
the answer differs from the job's Worker replicas, sets them through the Kubernetes API (a merge patch of the
TFJob's Worker replicas, or of the JobSet's worker Job). New workers join through the shard service as they do
locally; removed ones return their shards when their heartbeats stop.

The manifest (`elastimator k8s manifest --autoscale`) gives the chief pod a ServiceAccount whose Role allows
exactly `get` and `patch` on this one job object and nothing else, and the settings in `AUTOSCALE_ENV`.
Parameter-server counts stay fixed (DLRover migrated parameter servers; that is a later step), and the parameter
servers' CPU, which the launcher reads from /proc on one machine, is not measured here: the policy's gain rule
alone removes a worker that brings no steps/s.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from typing import Any, Callable

from elastimator.cluster import autoscale
from elastimator.errors import ClusterError

AUTOSCALE_ENV = "ELASTIMATOR_K8S_AUTOSCALE"
"""JSON of `Settings`, set in the chief's pod by the manifest."""

logger = logging.getLogger("elastimator")


@dataclasses.dataclass(frozen=True)
class Settings:
    api: str
    """"tfjob" or "jobset": what the job was submitted as."""
    name: str
    namespace: str
    min_workers: int
    max_workers: int
    every_secs: float = 30.0

    @classmethod
    def from_env(cls, environ=os.environ) -> "Settings | None":
        raw = environ.get(AUTOSCALE_ENV)
        if not raw:
            return None
        try:
            return cls(**json.loads(raw))
        except (TypeError, ValueError) as e:
            raise ClusterError(f"{AUTOSCALE_ENV} does not parse ({e}); write the manifest again with "
                               "`elastimator k8s manifest --autoscale`.") from None


def rbac(spec, api: str) -> list[dict[str, Any]]:
    """The ServiceAccount, Role and RoleBinding of the chief's autoscaler."""
    from elastimator.cluster import jobset, k8s

    group, plural = (jobset.GROUP, jobset.PLURAL) if api == "jobset" else (k8s.GROUP, k8s.PLURAL)
    name, namespace = f"{spec.name}-scaler", spec.namespace
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": namespace},
         "rules": [{"apiGroups": [group], "resources": [plural], "resourceNames": [spec.name],
                    "verbs": ["get", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


def chief_settings(spec, api: str) -> dict[str, Any]:
    """What the chief's pod gets: its ServiceAccount and the autoscaler's settings."""
    settings = Settings(api=api, name=spec.name, namespace=spec.namespace, min_workers=1 if api == "jobset" else 0,
                        max_workers=spec.worker_slots)
    return {"serviceAccountName": f"{spec.name}-scaler",
            "env": {"name": AUTOSCALE_ENV, "value": json.dumps(dataclasses.asdict(settings), sort_keys=True)}}


class Autoscaler:
    """The chief's scaling loop (see the module doc). `turn(now)` is one measurement and decision; `start()`
    runs turns on a daemon thread until `stop()`."""

    def __init__(self, settings: Settings, model_dir: str, api_client=None, clock: Callable[[], float] = time.monotonic,
                 limits: autoscale.ScalingLimits | None = None):
        self.settings, self.model_dir = settings, model_dir
        self.limits = limits or autoscale.ScalingLimits(min_workers=settings.min_workers,
                                                        max_workers=settings.max_workers)
        self._api_client, self._clock = api_client, clock
        self._tracker = autoscale.Tracker()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.decisions: list[autoscale.Decision] = []

    def start(self) -> "Autoscaler":
        self._thread = threading.Thread(target=self._loop, name="k8s-autoscaler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.every_secs):
            try:
                self.turn(self._clock())
            except Exception as e:  # noqa: BLE001 - the job trains on; scaling waits for the next turn
                logger.warning("Autoscaling skipped a turn: %s: %s", type(e).__name__, e)

    def turn(self, now: float) -> autoscale.Decision | None:
        """Measures, decides, and sets the job's workers where the decision differs; None before the chief has
        written its first steps/s."""
        workers = self.current_workers()
        if self._tracker.measure(now, workers, self.model_dir, ps_pids=()) is None:
            return None
        decision = autoscale.decide(self._tracker.history, self.limits)
        self.decisions.append(decision)
        if decision.workers != workers:
            logger.info("Autoscaling: %s (%d -> %d worker(s)).", decision.reason, workers, decision.workers)
            self._scale(decision.workers)
        return decision

    def current_workers(self) -> int:
        from kubernetes import client

        from elastimator.cluster import jobset, k8s

        objects = client.CustomObjectsApi(k8s.connect(self._api_client))
        s = self.settings
        if s.api == "jobset":
            job = objects.get_namespaced_custom_object(jobset.GROUP, jobset.VERSION, s.namespace, jobset.PLURAL, s.name)
            worker = next(r for r in job["spec"]["replicatedJobs"] if r["name"] == "worker")
            return int(worker["template"]["spec"]["parallelism"])
        job = objects.get_namespaced_custom_object(k8s.GROUP, k8s.VERSION, s.namespace, k8s.PLURAL, s.name)
        return int(job["spec"]["tfReplicaSpecs"].get("Worker", {}).get("replicas", 0))

    def _scale(self, workers: int) -> None:
        from elastimator.cluster import jobset, k8s

        api = k8s.connect(self._api_client)
        if self.settings.api == "jobset":
            jobset.scale(self.settings.name, workers, self.settings.namespace, api)
        else:
            k8s.scale(self.settings.name, workers, self.settings.namespace, api_client=api)
