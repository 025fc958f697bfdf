"""``kubectl get`` columns: server-side Table rendering (Accept: application/json;as=Table;...)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .meta import parse_time

Obj = dict[str, Any]


def human_duration(seconds: float) -> str:
    """kubectl's ``duration.HumanDuration`` (k8s.io/apimachinery/pkg/util/duration), bucket for bucket."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _age(obj: Obj) -> str:
    created = obj.get("metadata", {}).get("creationTimestamp")
    return human_duration(time.time() - parse_time(created)) if created else "<unknown>"


def _job_status(obj: Obj) -> str:
    for cond in reversed(obj.get("status", {}).get("conditions") or []):
        if cond.get("status") == "True" and cond["type"] in (
            "Complete",
            "Failed",
            "Suspended",
            "FailureTarget",
            "SuccessCriteriaMet",
        ):
            return {
                "Failed": "Failed",
                "FailureTarget": "FailureTarget",
                "Suspended": "Suspended",
                "SuccessCriteriaMet": "SuccessCriteriaMet",
            }.get(cond["type"], "Complete")
    return "Running"


def _job_duration(obj: Obj) -> str:
    status = obj.get("status", {})
    if not status.get("startTime"):
        return ""
    end = parse_time(status["completionTime"]) if status.get("completionTime") else time.time()
    return human_duration(end - parse_time(status["startTime"]))


def _pod_ready(obj: Obj) -> str:
    statuses = obj.get("status", {}).get("containerStatuses") or []
    total = len(obj.get("spec", {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_status(obj: Obj) -> str:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = obj.get("status", {})
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state", {})
        if "waiting" in state and state["waiting"].get("reason"):
            return state["waiting"]["reason"]
        if "terminated" in state and state["terminated"].get("reason") and status.get("phase") != "Running":
            return state["terminated"]["reason"]
    return status.get("reason") or status.get("phase", "Pending")


def _restarts(obj: Obj) -> int:
    return sum(cs.get("restartCount", 0) for cs in obj.get("status", {}).get("containerStatuses") or [])


def _last_condition(obj: Obj) -> str:
    conds = obj.get("status", {}).get("conditions") or []
    return conds[-1]["type"] if conds else ""


Column = tuple[str, str, Callable[[Obj], Any]]

COLUMNS: dict[str, list[Column]] = {
    "Pod": [
        ("Ready", "string", _pod_ready),
        ("Status", "string", _pod_status),
        ("Restarts", "integer", _restarts),
        ("Age", "string", _age),
        ("IP", "string", lambda o: o.get("status", {}).get("podIP", "<none>")),
    ],
    "Job": [
        ("Status", "string", _job_status),
        (
            "Completions",
            "string",
            lambda o: f"{o.get('status', {}).get('succeeded', 0)}/{o.get('spec', {}).get('completions', 1)}",
        ),
        ("Duration", "string", _job_duration),
        ("Age", "string", _age),
    ],
    "CronJob": [
        ("Schedule", "string", lambda o: o["spec"].get("schedule", "")),
        ("Timezone", "string", lambda o: o["spec"].get("timeZone", "<none>")),
        ("Suspend", "boolean", lambda o: bool(o["spec"].get("suspend", False))),
        ("Active", "integer", lambda o: len(o.get("status", {}).get("active") or [])),
        ("Last Schedule", "string", lambda o: o.get("status", {}).get("lastScheduleTime", "<none>")),
        ("Age", "string", _age),
    ],
    "PyTorchJob": [("State", "string", _last_condition), ("Age", "string", _age)],
    "Deployment": [
        (
            "Ready",
            "string",
            lambda o: f"{o.get('status', {}).get('readyReplicas', 0)}/{o['spec'].get('replicas', 1)}",
        ),
        ("Up-to-date", "integer", lambda o: o.get("status", {}).get("updatedReplicas", 0)),
        ("Available", "integer", lambda o: o.get("status", {}).get("availableReplicas", 0)),
        ("Age", "string", _age),
    ],
    "Service": [
        ("Type", "string", lambda o: o["spec"].get("type", "ClusterIP")),
        ("Cluster-IP", "string", lambda o: o["spec"].get("clusterIP", "")),
        ("Age", "string", _age),
    ],
    "ReplicaSet": [
        ("Desired", "integer", lambda o: o["spec"].get("replicas", 1)),
        ("Current", "integer", lambda o: o.get("status", {}).get("replicas", 0)),
        ("Ready", "integer", lambda o: o.get("status", {}).get("readyReplicas", 0)),
        ("Age", "string", _age),
    ],
    "HorizontalPodAutoscaler": [
        ("Reference", "string", lambda o: f"{o['spec']['scaleTargetRef'].get('kind')}/"
                                          f"{o['spec']['scaleTargetRef'].get('name')}"),
        ("Minpods", "integer", lambda o: o["spec"].get("minReplicas", 1)),
        ("Maxpods", "integer", lambda o: o["spec"].get("maxReplicas", 0)),
        ("Replicas", "integer", lambda o: o.get("status", {}).get("currentReplicas", 0)),
        ("Age", "string", _age),
    ],
    "Node": [
        ("Status", "string", lambda o: "Ready" if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in o.get("status", {}).get("conditions") or []) else "NotReady"),
        ("Age", "string", _age),
        ("Version", "string", lambda o: o.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")),
    ],
}


def to_table(items: list[Obj], kind: str, resource_version: str) -> Obj:
    columns = COLUMNS.get(kind, [("Age", "string", _age)])
    definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
    definitions += [
        {"name": n, "type": t, "format": "", "description": n, "priority": 0} for n, t, _ in columns
    ]
    rows = [{"cells": [o["metadata"]["name"], *[fn(o) for _, _, fn in columns]], "object": o} for o in items]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    }


def wants_table(accept: str) -> bool:
    return "as=Table" in accept
