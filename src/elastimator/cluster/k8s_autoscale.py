"""Autoscaling a parameter-server job's workers on Kubernetes: what the manifest gives the chief (its settings,
its ServiceAccount and Role). The loop the chief runs is `k8s_scaler.Autoscaler`.

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
import os
from typing import Any

from elastimator.cluster.k8s_apis import BY_API
from elastimator.errors import ClusterError

AUTOSCALE_ENV = "ELASTIMATOR_K8S_AUTOSCALE"
"""JSON of `Settings`, set in the chief's pod by the manifest."""


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
    resource = BY_API[api]
    group, plural = resource.group, resource.plural
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
