"""The Kubernetes APIs a job is submitted as: a Kubeflow TFJob or a JobSet, each a custom resource named by its
group, version and plural (what the custom-objects API and an RBAC rule need)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class CustomResource:
    group: str
    version: str
    plural: str


TFJOB = CustomResource("kubeflow.org", "v1", "tfjobs")
JOBSET = CustomResource("jobset.x-k8s.io", "v1alpha2", "jobsets")
BY_API = {"tfjob": TFJOB, "jobset": JOBSET}
"""By the name `--api` takes."""
