"""A manifest as a whole, whichever API its job is written for: every object validated (a TFJob or a JobSet,
and the Secret, NetworkPolicy and RBAC objects beside it) and created in order. Above `k8s` (TFJob) and
`jobset`, which know only their own kind."""

from __future__ import annotations

from typing import Any

from elastimator.cluster import jobset, k8s, shared_storage
from elastimator.errors import ClusterError


def validate(document: dict[str, Any]) -> list[str]:
    """Problems with one manifest object (empty when valid)."""
    if document.get("kind") == "JobSet":
        return jobset.validate(document)
    return k8s.validate(document)


def check(documents: list[dict[str, Any]], shared: bool = True) -> None:
    """Raises ClusterError listing every problem of every object, and (`shared`) a job whose pods share no
    model_dir (shared_storage.py)."""
    problems = [p for d in documents for p in validate(d)]
    if shared and not problems:  # read only what the schemas passed
        problems = shared_storage.problems(documents)
    if problems:
        raise ClusterError("the manifest is invalid:\n  " + "\n  ".join(problems))


def submit(documents: list[dict[str, Any]], api_client=None) -> list[str]:
    """Validates, then creates each object in the manifest's order; returns what was created."""
    check(documents)
    api = k8s.connect(api_client)
    created = []
    for document in documents:
        kind = document["kind"]
        if kind in k8s.COMMON_KINDS:
            k8s.create_common(document, api)
        elif kind == "JobSet":
            jobset.create(document, api)
        else:
            k8s.create(document, api)
        created.append(f"{kind} {document['metadata'].get('namespace', 'default')}/{document['metadata']['name']}")
    return created
