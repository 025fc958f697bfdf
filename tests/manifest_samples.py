"""Small valid raw manifests (``manifest=``) and a way to change one field, for the bad-input tests."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["CONTAINER", "JOB", "PYTORCHJOB", "changed"]

#: The path of a Job's (first) container, as the errors name it.
CONTAINER = "spec.template.spec.containers[0]"


def _pod(container: str, **spec: Any) -> dict[str, Any]:
    command = ["python", "-c", "print(1)"]
    return {"spec": {**spec, "containers": [{"name": container, "image": "python:3.11", "command": command}]}}


JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "raw"},
    "spec": {"template": _pod("main", restartPolicy="Never")},
}
PYTORCHJOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "raw"},
    "spec": {
        "pytorchReplicaSpecs": {
            role: {"replicas": count, "template": _pod("pytorch")}
            for role, count in (("Master", 1), ("Worker", 2))
        }
    },
}


def changed(manifest: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``manifest`` with ``value`` at the dotted ``path`` (``[i]`` indexes a list)."""
    out = copy.deepcopy(manifest)
    target: Any = out
    keys = path.replace("[", ".").replace("]", "").split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
    target[keys[-1]] = value
    return out
