"""Disruptions: a pod the cluster took away (condition ``DisruptionTarget``) is not a failed pod.

Kubernetes marks such a pod with ``DisruptionTarget=True`` and a reason saying who took it
(``EvictionByEvictionAPI``: a drain; ``PreemptionByScheduler``; ``DeletionByTaintManager``;
``TerminationByKubelet``: node pressure or a graceful node shutdown). The wait names each once
(:mod:`~airflow_k8s_ml.status.wait_report`) and the finish counts them for the XCom. Pure, standard library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["DISRUPTION_TARGET", "disrupted_pods", "disruption_of"]

DISRUPTION_TARGET = "DisruptionTarget"


def disruption_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``DisruptionTarget=True`` condition (reason and message in the cluster's words), or None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return dict(condition)
    return None


def disrupted_pods(pods: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One record per disrupted pod (by uid), oldest first: name, reason, message, and when the pod started
    and was disrupted (for the time the disruption cost: from the pod's start to its disruption)."""
    seen: dict[str, dict[str, Any]] = {}
    for pod in pods:
        condition = disruption_of(pod)
        meta = pod.get("metadata") or {}
        if condition is None or str(meta.get("uid")) in seen:
            continue
        seen[str(meta.get("uid"))] = {
            "pod": meta.get("name"),
            "reason": condition.get("reason"),
            "message": condition.get("message"),
            "at": condition.get("lastTransitionTime"),
            "started": (pod.get("status") or {}).get("startTime"),
        }
    return sorted(seen.values(), key=lambda d: str(d["at"] or ""))
