"""Where each rehearsed pod's volumes live on this machine, as Kubernetes gives them. Pure: paths only.

* A PersistentVolumeClaim is one directory, shared by every pod that mounts it (a ReadWriteMany claim: what a
  job's model_dir needs); `--claim NAME=DIR` names it, else `<work>/claims/<NAME>`.
* An emptyDir is one directory per pod, kept across the container's restarts and new when the pod is
  (kubernetes.io/docs/concepts/storage/volumes/#emptydir).
* A hostPath is the host's own path (the one machine here is every pod's node).
* Paths no volume covers are the container's own disk, one per pod: /tmp, /dev/shm, the image's /job (a copy on
  write of `--image-root`), and the `--model-dir` of an `elastimator run` command, so that pods without shared
  storage share nothing there, as they would on a cluster.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping

from elastimator.cluster.rehearsal_pods import Mount, Pod
from elastimator.errors import ClusterError

OWN_DISK = ("/tmp", "/dev/shm")
"""Paths every container has of its own."""


@dataclasses.dataclass(frozen=True)
class Bind:
    """A directory of this machine at a path in the pod."""

    path: str
    source: str
    shared_by: str
    """'claim NAME', 'hostPath', 'pod' (emptyDir or the container's own disk)."""
    read_only: bool = False


def _model_dir(command: tuple[str, ...]) -> str | None:
    for i, word in enumerate(command):
        if word == "--model-dir" and i + 1 < len(command):
            return command[i + 1]
        if word.startswith("--model-dir="):
            return word.partition("=")[2]
    return None


def _covered(path: str, mounts) -> bool:
    return any(path.rstrip("/") == m.path.rstrip("/") or path.startswith(m.path.rstrip("/") + "/") for m in mounts)


def binds(pod: Pod, work_dir: str, claims: Mapping[str, str], generation: int = 0) -> list[Bind]:
    """The pod's directories (see the module doc), outermost first; `generation` counts the pod's re-creations
    (a new pod gets new emptyDirs and a new disk; a container restarted in place keeps them).

    Raises:
        ClusterError: for a volume kind the rehearsal cannot give (configMap, secret, nfs) or a mount naming no
            volume of the pod.
    """
    pod_dir = os.path.join(work_dir, "pods", pod.name, str(generation))
    found: list[Bind] = []
    mounts: list[Mount] = list(pod.mounts)
    for mount in mounts:
        if mount.kind == "persistentVolumeClaim":
            source = claims.get(mount.source) or os.path.join(work_dir, "claims", mount.source)
            found.append(Bind(mount.path, source, f"claim {mount.source}", mount.read_only))
        elif mount.kind == "emptyDir":
            found.append(Bind(mount.path, os.path.join(pod_dir, "volumes", mount.volume), "pod", mount.read_only))
        elif mount.kind == "hostPath":
            found.append(Bind(mount.path, mount.source, "hostPath", mount.read_only))
        elif mount.kind == "none":
            raise ClusterError(f"pod {pod.name}: volumeMount {mount.volume!r} names no volume of the pod; the API "
                               "server would refuse it. Add the volume or drop the mount.")
        else:
            raise ClusterError(f"pod {pod.name}: volume {mount.volume!r} is a {mount.kind}, which the rehearsal "
                               "does not give; use a persistentVolumeClaim, emptyDir or hostPath to rehearse.")
    model_dir = _model_dir(pod.command)
    own = [p for p in (*OWN_DISK, model_dir) if p and "://" not in p and os.path.isabs(p) and not _covered(p, mounts)]
    for path in own:
        found.append(Bind(path, os.path.join(pod_dir, "disk", path.strip("/").replace("/", "_")), "pod"))
    return sorted(found, key=lambda b: b.path.count("/"))


def claim_dirs(pods, work_dir: str, claims: Mapping[str, str]) -> dict[str, str]:
    """Each claim the pods mount, with its directory (one for all of them)."""
    return {m.source: claims.get(m.source) or os.path.join(work_dir, "claims", m.source)
            for pod in pods for m in pod.mounts if m.kind == "persistentVolumeClaim"}
