"""Deployment status and conditions (pkg/controller/deployment/sync.go, progress.go, util), pure.

``calculate_status`` counts replicas over the Deployment's ReplicaSets and sets ``Available``;
``rollout_status`` adds the ``Progressing`` bookkeeping that ``syncRolloutStatus`` does:
NewReplicaSetAvailable when complete, ReplicaSetUpdated (lastUpdateTime refreshed) on any progress,
ProgressDeadlineExceeded when nothing moved for progressDeadlineSeconds. Zero counters are omitted like
Go's ``omitempty`` does.
"""

from __future__ import annotations

import copy
from typing import Any

from ...meta import parse_time, rfc3339
from .replicas import MAX_INT32, max_unavailable, spec_replicas, status_count, total_spec, total_status

Obj = dict[str, Any]

AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
# Reasons (deploymentutil constants).
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
FAILED_RS_CREATE = "ReplicaSetCreateError"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"


# -- conditions ----------------------------------------------------------------------------------------
def new_condition(type_: str, status: str, reason: str, message: str, now: float) -> Obj:
    stamp = rfc3339(now)
    return {
        "type": type_,
        "status": status,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def get_condition(status: Obj | None, type_: str) -> Obj | None:
    for condition in (status or {}).get("conditions") or []:
        if condition.get("type") == type_:
            return condition
    return None


def set_condition(status: Obj, condition: Obj) -> None:
    """``SetDeploymentCondition``: same status and reason is a no-op; a changed one moves to the end and
    keeps lastTransitionTime when only the reason changed."""
    current = get_condition(status, condition["type"])
    if (
        current is not None
        and current.get("status") == condition["status"]
        and current.get("reason") == condition["reason"]
    ):
        return
    condition = dict(condition)
    if current is not None and current.get("status") == condition["status"]:
        condition["lastTransitionTime"] = current.get("lastTransitionTime")
    remove_condition(status, condition["type"])
    status.setdefault("conditions", []).append(condition)


def remove_condition(status: Obj, type_: str) -> None:
    kept = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    if kept:
        status["conditions"] = kept
    else:
        status.pop("conditions", None)


def has_progress_deadline(deployment: Obj) -> bool:
    deadline = (deployment.get("spec") or {}).get("progressDeadlineSeconds")
    return deadline is not None and deadline != MAX_INT32


# -- status --------------------------------------------------------------------------------------------
def _counter(status: Obj, name: str, value: int) -> None:
    if value:
        status[name] = value
    else:
        status.pop(name, None)


def calculate_status(all_rss: list[Obj | None], new_rs: Obj | None, deployment: Obj, now: float) -> Obj:
    """``calculateStatus``: counters over every ReplicaSet plus the Available condition."""
    old = deployment.get("status") or {}
    available = total_status(all_rss, "availableReplicas")
    unavailable = max(total_spec(all_rss) - available, 0)
    status: Obj = {}
    _counter(status, "observedGeneration", int((deployment.get("metadata") or {}).get("generation") or 0))
    _counter(status, "replicas", total_status(all_rss, "replicas"))
    _counter(status, "updatedReplicas", status_count(new_rs, "replicas"))
    _counter(status, "readyReplicas", total_status(all_rss, "readyReplicas"))
    _counter(status, "availableReplicas", available)
    _counter(status, "unavailableReplicas", unavailable)
    if old.get("conditions"):
        status["conditions"] = copy.deepcopy(old["conditions"])
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if available >= spec_replicas(deployment) - max_unavailable(deployment):
        set_condition(
            status,
            new_condition(AVAILABLE, "True", MIN_AVAILABLE, "Deployment has minimum availability.", now),
        )
    else:
        set_condition(
            status,
            new_condition(
                AVAILABLE, "False", MIN_UNAVAILABLE, "Deployment does not have minimum availability.", now
            ),
        )
    return status


def deployment_complete(deployment: Obj, status: Obj) -> bool:
    replicas = spec_replicas(deployment)
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    return (
        status.get("updatedReplicas", 0) == replicas
        and status.get("replicas", 0) == replicas
        and status.get("availableReplicas", 0) == replicas
        and status.get("observedGeneration", 0) >= generation
    )


def deployment_progressing(deployment: Obj, status: Obj) -> bool:
    """Any of: more updated replicas, fewer old ones, more ready, more available than last recorded."""
    old = deployment.get("status") or {}

    def get(s: Obj, name: str) -> int:
        return int(s.get(name) or 0)

    old_old = get(old, "replicas") - get(old, "updatedReplicas")
    new_old = get(status, "replicas") - get(status, "updatedReplicas")
    return (
        get(status, "updatedReplicas") > get(old, "updatedReplicas")
        or new_old < old_old
        or get(status, "readyReplicas") > get(old, "readyReplicas")
        or get(status, "availableReplicas") > get(old, "availableReplicas")
    )


def deployment_timed_out(deployment: Obj, status: Obj, now: float) -> bool:
    """No progress reported for progressDeadlineSeconds since the Progressing condition's lastUpdateTime."""
    if not has_progress_deadline(deployment):
        return False
    condition = get_condition(status, PROGRESSING)
    if condition is None or condition.get("reason") == NEW_RS_AVAILABLE:
        return False
    if condition.get("reason") == TIMED_OUT:
        return True
    deadline = int(deployment["spec"]["progressDeadlineSeconds"])
    return parse_time(condition.get("lastUpdateTime") or rfc3339(now)) + deadline < now


def rollout_status(all_rss: list[Obj | None], new_rs: Obj | None, deployment: Obj, now: float) -> Obj:
    """``syncRolloutStatus`` without the write: the status the Deployment should have now."""
    status = calculate_status(all_rss, new_rs, deployment, now)
    if not has_progress_deadline(deployment):
        remove_condition(status, PROGRESSING)
    current = get_condition(deployment.get("status"), PROGRESSING)
    complete_before = (
        status.get("replicas", 0) == status.get("updatedReplicas", 0)
        and current is not None
        and current.get("reason") == NEW_RS_AVAILABLE
    )
    if has_progress_deadline(deployment) and not complete_before:
        _progress(status, deployment, new_rs, current, now)
    failure = replica_failure(all_rss, new_rs)
    if failure is not None:
        set_condition(status, failure)
    else:
        remove_condition(status, REPLICA_FAILURE)
    return status


def _progress(status: Obj, deployment: Obj, new_rs: Obj | None, current: Obj | None, now: float) -> None:
    name = deployment["metadata"]["name"]
    subject = f'ReplicaSet "{new_rs["metadata"]["name"]}"' if new_rs is not None else f'Deployment "{name}"'
    if deployment_complete(deployment, status):
        set_condition(
            status,
            new_condition(
                PROGRESSING, "True", NEW_RS_AVAILABLE, f"{subject} has successfully progressed.", now
            ),
        )
    elif deployment_progressing(deployment, status):
        condition = new_condition(PROGRESSING, "True", RS_UPDATED, f"{subject} is progressing.", now)
        if current is not None:
            if current.get("status") == "True":
                condition["lastTransitionTime"] = current.get("lastTransitionTime")
            remove_condition(status, PROGRESSING)
        set_condition(status, condition)
    elif deployment_timed_out(deployment, status, now):
        set_condition(
            status,
            new_condition(PROGRESSING, "False", TIMED_OUT, f"{subject} has timed out progressing.", now),
        )


def replica_failure(all_rss: list[Obj | None], new_rs: Obj | None) -> Obj | None:
    """``getReplicaFailures``: the new ReplicaSet's ReplicaFailure first, else any old one's."""
    for candidates in ([new_rs], all_rss):
        for rs in candidates:
            for condition in ((rs or {}).get("status") or {}).get("conditions") or []:
                if condition.get("type") == REPLICA_FAILURE:
                    return {
                        "type": REPLICA_FAILURE,
                        "status": condition.get("status"),
                        "lastUpdateTime": condition.get("lastTransitionTime"),
                        "lastTransitionTime": condition.get("lastTransitionTime"),
                        "reason": condition.get("reason"),
                        "message": condition.get("message"),
                    }
    return None


def paused_condition(deployment: Obj, now: float) -> Obj | None:
    """``checkPausedConditions``: the Progressing condition to record on pause/resume, if any."""
    if not has_progress_deadline(deployment):
        return None
    current = get_condition(deployment.get("status"), PROGRESSING)
    if current is not None and current.get("reason") == TIMED_OUT:
        return None
    paused_recorded = current is not None and current.get("reason") == PAUSED
    paused = bool((deployment.get("spec") or {}).get("paused"))
    if paused and not paused_recorded:
        return new_condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now)
    if not paused and paused_recorded:
        return new_condition(PROGRESSING, "Unknown", RESUMED, "Deployment is resumed", now)
    return None
