"""batch/v1 CronJob status -> :class:`WorkloadState`. A CronJob never finishes: it is pending (waiting for
its next time, or suspended) or running (has active Jobs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.status._conditions import status_of
from airflow_k8s_ml.status.state import PENDING, RUNNING, WorkloadState

__all__ = ["classify_cronjob"]


def classify_cronjob(cronjob: Mapping[str, Any]) -> WorkloadState:
    status = status_of(cronjob)
    active = [ref.get("name") for ref in status.get("active") or [] if isinstance(ref, Mapping)]
    details: dict[str, Any] = {"active": active}
    for key in ("lastScheduleTime", "lastSuccessfulTime"):
        if status.get(key):
            details[key] = status[key]
    if active:
        return WorkloadState(RUNNING, "JobActive", f"active jobs: {', '.join(map(str, active))}", details)
    if (cronjob.get("spec") or {}).get("suspend") is True:
        return WorkloadState(PENDING, "Suspended", "CronJob is suspended", details)
    last = status.get("lastScheduleTime")
    message = f"last scheduled at {last}" if last else "not scheduled yet"
    return WorkloadState(PENDING, "Scheduled", message, details)
