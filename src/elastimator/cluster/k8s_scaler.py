"""The chief's autoscaling loop on Kubernetes (see `k8s_autoscale` for what the manifest gives it): every
`every_secs` it measures the job's global steps/s from the chief's own summaries, asks the launcher's policy
(`autoscale.decide`), and where the answer differs from the job's workers, sets them through the API of the job's
kind (`k8s` for a TFJob, `jobset` for a JobSet)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from elastimator.cluster import autoscale, jobset, k8s
from elastimator.cluster.k8s_apis import BY_API
from elastimator.cluster.k8s_autoscale import Settings

logger = logging.getLogger("elastimator")


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

        s, resource = self.settings, BY_API[self.settings.api]
        job = client.CustomObjectsApi(k8s.connect(self._api_client)).get_namespaced_custom_object(
            resource.group, resource.version, s.namespace, resource.plural, s.name)
        if s.api == "jobset":
            worker = next(r for r in job["spec"]["replicatedJobs"] if r["name"] == "worker")
            return int(worker["template"]["spec"]["parallelism"])
        return int(job["spec"]["tfReplicaSpecs"].get("Worker", {}).get("replicas", 0))

    def _scale(self, workers: int) -> None:
        api = k8s.connect(self._api_client)
        if self.settings.api == "jobset":
            jobset.scale(self.settings.name, workers, self.settings.namespace, api)
        else:
            k8s.scale(self.settings.name, workers, self.settings.namespace, api_client=api)
