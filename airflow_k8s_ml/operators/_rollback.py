"""Plan a Deployment rollback exactly the way ``kubectl rollout undo`` does it. Pure: dicts in, a plan out.

Why a port and not "re-apply the old manifest": kubectl's undo restores the *ReplicaSet's* template, i.e. the
exact pod template that last served (after every server default and mutation), and the Deployment
controller then re-adopts that ReplicaSet, which becomes the newest revision. Re-rendering an old manifest
could differ in a defaulted field and start a third ReplicaSet. Ported from kubectl's
``polymorphichelpers/rollback.go`` (``DeploymentRollbacker.Rollback``, ``deploymentRevision``,
``equalIgnoreHash``, ``getDeploymentPatch``) and ``deploymentutil.Revision``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ANNOTATIONS_TO_SKIP",
    "POD_TEMPLATE_HASH_LABEL",
    "RollbackPlan",
    "controlled_by",
    "equal_ignore_hash",
    "plan_rollback",
    "revision_hash",
    "revision_of",
]

POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"

#: Annotations kubectl keeps from the Deployment instead of copying them back from the ReplicaSet.
ANNOTATIONS_TO_SKIP = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION_ANNOTATION,
        "deployment.kubernetes.io/revision-history",
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        "deprecated.deployment.rollback.to",
    }
)


@dataclass(frozen=True)
class RollbackPlan:
    """What ``kubectl rollout undo`` would do.

    ``action``: ``patch`` (send ``patch`` as ``application/json-patch+json``), ``skip`` (the Deployment
    already runs that template; kubectl prints "skipped rollback") or ``impossible`` (no such revision, no
    history, paused). ``message`` is kubectl's wording; ``replica_set`` the ReplicaSet whose template is
    restored.
    """

    action: Literal["patch", "skip", "impossible"]
    message: str
    to_revision: int = 0
    replica_set: str | None = None
    patch: list[dict[str, Any]] = field(default_factory=list)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def revision_of(obj: Mapping[str, Any]) -> int | None:
    """``deploymentutil.Revision``: the revision annotation, 0 when absent, None when not an integer
    (kubectl skips such ReplicaSets)."""
    value = (_meta(obj).get("annotations") or {}).get(REVISION_ANNOTATION)
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def controlled_by(replica_sets: Iterable[Mapping[str, Any]], deployment: Mapping[str, Any]) -> list[dict]:
    """The ReplicaSets whose *controller* ownerReference is this Deployment (``metav1.IsControlledBy``).

    A selector match alone is not ownership: an orphaned or foreign ReplicaSet with the same labels must
    never be rolled back to.
    """
    uid = _meta(deployment).get("uid")
    out = []
    for rs in replica_sets:
        for ref in _meta(rs).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("uid") == uid and uid:
                out.append(dict(rs))
                break
    return out


def _semantic(value: Any) -> Any:
    """apimachinery's semantic equality treats empty and absent maps/lists alike: drop the empties."""
    if isinstance(value, Mapping):
        cleaned = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(template))
    labels = (out.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    return out


def equal_ignore_hash(left: Mapping[str, Any], right: Mapping[str, Any]) -> bool:
    """``equalIgnoreHash``: two pod templates equal apart from the ``pod-template-hash`` label."""
    return _semantic(_without_hash(left)) == _semantic(_without_hash(right))


def _choose(replica_sets: list[dict], to_revision: int) -> tuple[dict | None, int]:
    """``deploymentRevision``: the ReplicaSet of ``to_revision``, or the second newest when it is 0."""
    latest: tuple[dict | None, int] = (None, -1)
    previous: tuple[dict | None, int] = (None, -1)
    for rs in replica_sets:
        revision = revision_of(rs)
        if revision is None:
            continue
        if to_revision == 0:
            if latest[1] < revision:
                previous, latest = latest, (rs, revision)
            elif previous[1] < revision:
                previous = (rs, revision)
        elif revision == to_revision:
            return rs, revision
    if to_revision > 0:
        return None, to_revision
    return previous


def plan_rollback(
    deployment: Mapping[str, Any], replica_sets: Iterable[Mapping[str, Any]], to_revision: int = 0
) -> RollbackPlan:
    """``kubectl rollout undo deployment/<name> [--to-revision=N]`` as a plan.

    ``replica_sets`` may be every ReplicaSet of the namespace: only those controlled by ``deployment`` count.
    The patch replaces ``/spec/template`` with the chosen ReplicaSet's template minus ``pod-template-hash``,
    and ``/metadata/annotations`` with the ReplicaSet's annotations plus the Deployment's own values of the
    keys kubectl never copies back (revision, desired/max replicas, last-applied configuration).
    """
    name = str(_meta(deployment).get("name", ""))
    if to_revision < 0:
        return RollbackPlan("impossible", f"unable to find specified revision {to_revision} in history")
    owned = controlled_by(replica_sets, deployment)
    rs, revision = _choose(owned, to_revision)
    if rs is None:
        if to_revision > 0:
            message = f"unable to find specified revision {to_revision} in history"
        else:
            message = f'no rollout history found for deployment "{name}"'
        return RollbackPlan("impossible", message, to_revision)
    spec = deployment.get("spec") or {}
    if spec.get("paused"):
        return RollbackPlan(
            "impossible",
            "you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume' and "
            "try again",
            revision,
        )
    rs_name = _meta(rs).get("name")
    template = (rs.get("spec") or {}).get("template") or {}
    if equal_ignore_hash(template, spec.get("template") or {}):
        return RollbackPlan(
            "skip",
            f"skipped rollback (current template already matches revision {revision})",
            revision,
            rs_name,
        )
    current = _meta(deployment).get("annotations") or {}
    annotations = {k: v for k, v in current.items() if k in ANNOTATIONS_TO_SKIP}
    annotations.update(
        {k: v for k, v in (_meta(rs).get("annotations") or {}).items() if k not in ANNOTATIONS_TO_SKIP}
    )
    patch = [
        {"op": "replace", "path": "/spec/template", "value": _without_hash(template)},
        {"op": "replace", "path": "/metadata/annotations", "value": annotations},
    ]
    return RollbackPlan("patch", "rolled back", revision, rs_name, patch)


def revision_hash(replica_sets: Iterable[Mapping[str, Any]], revision: int) -> str | None:
    """The ``pod-template-hash`` of the ReplicaSet holding ``revision``: selects that revision's pods."""
    for rs in replica_sets:
        if revision_of(rs) == revision:
            labels = ((rs.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
            return labels.get(POD_TEMPLATE_HASH_LABEL) or (_meta(rs).get("labels") or {}).get(
                POD_TEMPLATE_HASH_LABEL
            )
    return None
