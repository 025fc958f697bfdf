"""Revision bookkeeping on ReplicaSet and Deployment annotations (deploymentutil), pure and in place.

The newest ReplicaSet carries ``deployment.kubernetes.io/revision`` = max(old revisions) + 1; a ReplicaSet
that becomes newest again (``kubectl rollout undo``) keeps its former numbers in ``revision-history``.
``desired-replicas`` / ``max-replicas`` record the Deployment size the ReplicaSet was sized for, which
proportional scaling reads back. Each function returns whether it changed anything, as upstream's do,
because the caller only writes when something changed.
"""

from __future__ import annotations

from typing import Any

from .replicas import DESIRED_REPLICAS, MAX_REPLICAS, REVISION, REVISION_HISTORY

Obj = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
ROLLBACK_TO = "deprecated.deployment.rollback.to"
# Annotations never copied from the Deployment to its ReplicaSets (``annotationsToSkip``).
SKIPPED = frozenset({LAST_APPLIED, REVISION, REVISION_HISTORY, DESIRED_REPLICAS, MAX_REPLICAS, ROLLBACK_TO})
MAX_HISTORY_CHARS = 2000


def _annotations(obj: Obj) -> dict[str, str]:
    meta = obj.setdefault("metadata", {})
    if meta.get("annotations") is None:
        meta["annotations"] = {}
    annotations: dict[str, str] = meta["annotations"]
    return annotations


def copy_deployment_annotations(deployment: Obj, rs: Obj) -> bool:
    """``copyDeploymentAnnotationsToReplicaSet`` (e.g. ``kubernetes.io/change-cause`` for rollout history)."""
    target = _annotations(rs)
    changed = False
    for key, value in ((deployment.get("metadata") or {}).get("annotations") or {}).items():
        if key in SKIPPED or target.get(key) == value:
            continue
        target[key] = value
        changed = True
    return changed


def set_replicas_annotations(rs: Obj, desired: int, maximum: int) -> bool:
    annotations = _annotations(rs)
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(maximum))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: Obj, desired: int, maximum: int) -> bool:
    annotations = (rs.get("metadata") or {}).get("annotations") or {}
    return annotations.get(DESIRED_REPLICAS) != str(desired) or annotations.get(MAX_REPLICAS) != str(maximum)


def _append_history(annotations: dict[str, str], old_revision: str) -> None:
    history = annotations.get(REVISION_HISTORY, "")
    if not history:
        annotations[REVISION_HISTORY] = old_revision
        return
    revisions = history.split(",")
    total = len(history) + len(old_revision) + 1
    start = 0
    while total > MAX_HISTORY_CHARS and start < len(revisions):
        total -= len(revisions[start]) + 1
        start += 1
    if total <= MAX_HISTORY_CHARS:
        annotations[REVISION_HISTORY] = ",".join([*revisions[start:], old_revision])


def set_new_rs_annotations(
    deployment: Obj, rs: Obj, new_revision: int, exists: bool, desired: int, maximum: int
) -> bool:
    """``SetNewReplicaSetAnnotations``: copy the Deployment's annotations, raise the revision (never lower
    it), remember the former revision when an old ReplicaSet becomes newest, size annotations on create."""
    changed = copy_deployment_annotations(deployment, rs)
    annotations = _annotations(rs)
    old_text = annotations.get(REVISION)
    try:
        old_revision = int(old_text) if old_text else 0
    except ValueError:
        return False
    if old_revision < new_revision:
        annotations[REVISION] = str(new_revision)
        changed = True
        if old_text:
            _append_history(annotations, old_text)
    if not exists and set_replicas_annotations(rs, desired, maximum):
        changed = True
    return changed


def set_deployment_revision(deployment: Obj, revision_text: str) -> bool:
    annotations = _annotations(deployment)
    if annotations.get(REVISION) == revision_text:
        return False
    annotations[REVISION] = revision_text
    return True
