"""How a pod is deleted (``pkg/registry/core/pod`` strategy): a pod bound to the node and not finished
stays terminating for its grace period while the kubelet stops its processes, and goes only when the
kubelet confirms with a zero grace period; DELETE answers with the pod itself."""

from __future__ import annotations

from typing import Any

from ..kinds import DeleteRule

DEFAULT_GRACE_PERIOD = 30


def _grace_period(pod: dict[str, Any], requested: int | None) -> int | None:
    if requested == 0:
        return None
    phase = (pod.get("status") or {}).get("phase", "Pending")
    if not (pod.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
        return None
    if requested is not None:
        return requested
    grace = pod["spec"].get("terminationGracePeriodSeconds")
    return DEFAULT_GRACE_PERIOD if grace is None else int(grace)


def _confirmed(pod: dict[str, Any]) -> bool:
    return pod["metadata"].get("deletionGracePeriodSeconds") == 0


POD_DELETE_RULE = DeleteRule(grace_period=_grace_period, removable=_confirmed, answers_with_object=True)
