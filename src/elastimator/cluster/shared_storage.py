"""Whether a manifest's pods share their model_dir: a job of several pods must, or its chief, workers and evaluator
share no checkpoints (each pod writing to its own disk) and the job trains, evaluates and exports nothing whole.

Shared means a volume mounted at (or above) the `--model-dir` of each pod's `elastimator run` (a PersistentVolumeClaim
that `k8s manifest --pvc` mounts, or any volume a user added), or a model_dir with a scheme (gs://, s3://, hdfs://),
which TensorFlow's file system reads from every pod. Reads documents only; no cluster is asked.
"""

from __future__ import annotations

from typing import Any, Iterator

from elastimator.cluster.k8s import CONTAINER

FIX = ("Mount shared storage there: `elastimator k8s manifest CONF --pvc CLAIM` mounts a ReadWriteMany "
       "PersistentVolumeClaim at --model-dir; or give a --model-dir on storage every pod reads, with a scheme "
       "(gs://bucket/dir, s3://..., hdfs://...).")


def _count(value) -> int:
    """A replica count as written; one where it is not a number (the schema's check names that)."""
    return value if isinstance(value, int) else 1


def _templates(document: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """(role, pods, pod template) of a TFJob's replicas or a JobSet's replicated jobs."""
    if document.get("kind") == "TFJob":
        for role, replica in (document.get("spec", {}).get("tfReplicaSpecs") or {}).items():
            yield role, _count(replica.get("replicas", 1)), replica.get("template", {})
    elif document.get("kind") == "JobSet":
        for replicated in document.get("spec", {}).get("replicatedJobs") or []:
            job = replicated.get("template", {}).get("spec", {})
            pods = _count(replicated.get("replicas", 1)) * _count(job.get("parallelism", 1))
            yield replicated.get("name", "?"), pods, job.get("template", {})


def _model_dir(container: dict[str, Any]) -> str | None:
    command = [*container.get("command", []), *container.get("args", [])]
    for i, word in enumerate(command):
        if word == "--model-dir" and i + 1 < len(command):
            return command[i + 1]
        if isinstance(word, str) and word.startswith("--model-dir="):
            return word.partition("=")[2]
    return None


def _mounted(container: dict[str, Any], path: str) -> bool:
    for mount in container.get("volumeMounts") or []:
        base = str(mount.get("mountPath", "")).rstrip("/")
        if base and (path.rstrip("/") == base or path.startswith(base + "/")):
            return True
    return False


def problems(documents: list[dict[str, Any]]) -> list[str]:
    """For each job object of several pods (or with a role that may scale up), the roles whose pods keep their
    model_dir on their own disk, with the fix; empty when the pods share it."""
    found = []
    for document in documents:
        templates = list(_templates(document))
        if len(templates) < 2 and sum(pods for _, pods, _ in templates) < 2:
            continue  # one pod: its own disk is the job's
        unshared, model_dir = [], None
        for role, _, template in templates:
            containers = [c for c in template.get("spec", {}).get("containers", []) if c.get("name") == CONTAINER]
            for container in containers:
                path = _model_dir(container)
                if path is None or "://" in path or _mounted(container, path):
                    continue
                unshared.append(role)
                model_dir = path
        if unshared:
            name = document.get("metadata", {}).get("name", "?")
            found.append(f"{document.get('kind')} {name}: its pods keep model_dir {model_dir} each on its own disk "
                         f"(no volume mounted there in {', '.join(unshared)}), so the chief, workers and evaluator "
                         f"share no checkpoints. {FIX}")
    return found
