"""Disruptions: a pod the cluster took away (condition ``DisruptionTarget``) is not a failed pod.

Kubernetes marks such a pod with ``DisruptionTarget=True`` and a reason saying who took it
(``EvictionByEvictionAPI``: a drain; ``PreemptionByScheduler``; ``DeletionByTaintManager``;
``TerminationByKubelet``: node pressure or a graceful node shutdown; ``DeletionByPodGC``). The wait names
each once and counts them against the operator's ``max_disruptions``
(:mod:`~airflow_k8s_ml.status.wait_report`); the finish puts the count and the time they cost in the XCom
(:func:`summary`).

**Lost time** of one disruption: from the later of the pod's start (``status.startTime``) and the newest
complete checkpoint committed before the disruption, to the disruption (the ``DisruptionTarget``
condition's ``lastTransitionTime``) - the work the replacement redoes. Without checkpoint times it is the
pod's whole life (an upper bound). Pure, standard library.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "DISRUPTION_TARGET",
    "Disruption",
    "count_text",
    "disrupted_pods",
    "disruption_of",
    "lost_seconds",
    "summary",
]

DISRUPTION_TARGET = "DisruptionTarget"

#: The cluster's reason -> the word a message uses for it (any other reason: "disrupted").
_VERBS: Mapping[str, str] = {
    "EvictionByEvictionAPI": "evicted",
    "TerminationByKubelet": "evicted",
    "PreemptionByScheduler": "preempted",
    "PreemptionByKubeScheduler": "preempted",  # the reason's name before Kubernetes 1.27
    "DeletionByTaintManager": "taint-evicted",
    "DeletionByPodGC": "garbage-collected",
}


@dataclass(frozen=True)
class Disruption:
    """One disrupted pod, as its ``DisruptionTarget`` condition says: who took it (``reason``, ``message``),
    when (``at``) and when the pod had started (``started``), both RFC 3339 as the API server writes them."""

    uid: str
    pod: str
    reason: str
    message: str
    at: str | None = None
    started: str | None = None

    @property
    def verb(self) -> str:
        return _VERBS.get(self.reason, "disrupted")

    def to_payload(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "reason": self.reason,
            "message": self.message,
            "at": self.at,
            "started": self.started,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Disruption:
        """Back from :meth:`to_payload` (an event's ``disruptions``; the uid is not carried)."""
        return cls(
            uid="",
            pod=str(payload.get("pod") or ""),
            reason=str(payload.get("reason") or ""),
            message=str(payload.get("message") or ""),
            at=payload.get("at"),
            started=payload.get("started"),
        )


def disruption_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``DisruptionTarget=True`` condition (reason and message in the cluster's words), or None."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return dict(condition)
    return None


def _record(pod: Mapping[str, Any], condition: Mapping[str, Any]) -> Disruption:
    meta = pod.get("metadata") or {}
    return Disruption(
        uid=str(meta.get("uid") or ""),
        pod=str(meta.get("name") or ""),
        reason=str(condition.get("reason") or ""),
        message=str(condition.get("message") or ""),
        at=condition.get("lastTransitionTime"),
        started=(pod.get("status") or {}).get("startTime"),
    )


def disrupted_pods(pods: Iterable[Mapping[str, Any]]) -> list[Disruption]:
    """One record per disrupted pod (by uid), oldest disruption first."""
    seen: dict[str, Disruption] = {}
    for pod in pods:
        condition = disruption_of(pod)
        if condition is None:
            continue
        record = _record(pod, condition)
        seen.setdefault(record.uid, record)
    return sorted(seen.values(), key=lambda d: str(d.at or ""))


def count_text(disruptions: Sequence[Disruption]) -> str:
    """``evicted 3 times`` when every disruption was of one kind, else
    ``disrupted 3 times (2 evicted, 1 preempted)``."""
    counts = Counter(d.verb for d in disruptions)
    total = len(disruptions)
    times = "time" if total == 1 else "times"
    if len(counts) == 1:
        return f"{next(iter(counts))} {total} {times}"
    parts = ", ".join(f"{n} {verb}" for verb, n in counts.most_common())
    return f"disrupted {total} {times} ({parts})"


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def lost_seconds(disruption: Disruption, checkpoints: Iterable[str] = ()) -> float | None:
    """The time one disruption cost (see the module docstring): from the later of the pod's start and the
    newest of ``checkpoints`` (commit times, RFC 3339) before the disruption, to the disruption. None when
    the pod's start or the disruption's time is unknown."""
    at, started = _time(disruption.at), _time(disruption.started)
    if at is None or started is None:
        return None
    since = started
    for text in checkpoints:
        moment = _time(text)
        if moment is not None and since < moment <= at:
            since = moment
    return max((at - since).total_seconds(), 0.0)


def summary(disruptions: Sequence[Disruption], checkpoints: Iterable[str] = ()) -> dict[str, Any]:
    """The XCom's ``disruptions``: the count, the time lost in all (seconds; None when no disruption's could
    be measured) and each disruption with its own lost time."""
    times = list(checkpoints)
    pods = []
    lost_total: float | None = None
    for disruption in disruptions:
        lost = lost_seconds(disruption, times)
        if lost is not None:
            lost_total = (lost_total or 0.0) + lost
        pods.append({**disruption.to_payload(), "lost_seconds": lost})
    return {"count": len(disruptions), "lost_seconds": lost_total, "pods": pods}
