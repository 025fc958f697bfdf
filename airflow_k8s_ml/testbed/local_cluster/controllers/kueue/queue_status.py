"""ClusterQueue and LocalQueue status from the workloads they hold (counts, flavor usage, ``Active``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..metav1_conditions import condition
from .quota import Usage, add_usage, quantity_string, workload_usage
from .workloads import has_reservation, with_conditions

Obj = dict[str, Any]


def _usage_rows(cq: Obj, usage: Usage) -> list[Obj]:
    rows = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            fname = str(flavor.get("name"))
            resources = [
                {
                    "name": r,
                    "total": quantity_string(r, usage.get((fname, r), Decimal(0))),
                    "borrowed": "0",
                }
                for r in group.get("coveredResources") or []
            ]
            rows.append({"name": fname, "resources": resources})
    return rows


def cluster_queue_status(cq: Obj, members: list[Obj], missing_flavors: list[str], now: float) -> Obj:
    """``members``: the queue's live workloads with their new status."""
    holding = [w for w in members if has_reservation(w)]
    usage: Usage = {}
    for wl in holding:
        usage = add_usage(usage, workload_usage(wl))
    if missing_flavors:
        missing = "[" + " ".join(missing_flavors) + "]"
        message = f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}"
        active = condition("Active", "False", "FlavorNotFound", message, now)
    else:
        active = condition("Active", "True", "Ready", "Can admit new workloads", now)
    status = with_conditions(cq.get("status") or {}, active)
    rows = _usage_rows(cq, usage)
    status.update(
        pendingWorkloads=len(members) - len(holding),
        reservingWorkloads=len(holding),
        admittedWorkloads=len(holding),
        flavorsReservation=rows,
        flavorsUsage=rows,
    )
    return status


def local_queue_status(lq: Obj, mine: list[Obj], cluster_queue_exists: bool, now: float) -> Obj:
    holding = [w for w in mine if has_reservation(w)]
    active = (
        condition("Active", "True", "Ready", "Can submit new workloads to localQueue", now)
        if cluster_queue_exists
        else condition(
            "Active", "False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue", now
        )
    )
    status = with_conditions(lq.get("status") or {}, active)
    status.update(
        pendingWorkloads=len(mine) - len(holding),
        reservingWorkloads=len(holding),
        admittedWorkloads=len(holding),
    )
    return status
