"""Flavor assignment against a ClusterQueue's nominal quota: pure, as upstream's ``flavorassigner``.

A workload is assigned all or nothing: every pod set gets a flavor per resource group whose unused
quota covers the pod set's requests (its per-pod requests times its count) plus what the earlier pod sets
of the same workload already took, or the workload gets nothing and the reason upstream would print
(``couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor
default-flavor, 1 more needed``). No cohorts, so no borrowing or lending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from airflow_k8s_ml.k8s import quantities

from ...kubelet.fit import pod_requests

Obj = dict[str, Any]
Usage = dict[tuple[str, str], Decimal]  # (flavor, resource) -> quantity

_BINARY = (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024))


def quantity_string(resource: str, value: Decimal) -> str:
    """``resources.ResourceQuantityString``: cpu in cores or millicores, memory in binary units."""
    if resource == "memory" and value == value.to_integral_value():
        for suffix, size in _BINARY:
            if value % size == 0:
                return f"{int(value // size)}{suffix}"
        return str(int(value))
    return quantities.format_plain(value)


def pod_set_requests(pod_set: Obj) -> dict[str, Decimal]:
    """Total requests of a pod set: one pod's requests times ``count``, zero requests left out."""
    count = Decimal(int(pod_set.get("count", 1)))
    per_pod = pod_requests(pod_set.get("template") or {})
    return {name: value * count for name, value in per_pod.items() if value > 0 and name != "pods"}


def nominal_quota(cluster_queue: Obj) -> Usage:
    quota: Usage = {}
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                value = quantities.try_parse(resource.get("nominalQuota", 0)) or Decimal(0)
                quota[(str(flavor.get("name")), str(resource.get("name")))] = value
    return quota


def workload_usage(workload: Obj) -> Usage:
    """What an admitted workload holds: its podSetAssignments' resourceUsage per flavor."""
    usage: Usage = {}
    admission = (workload.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for resource, raw in (assignment.get("resourceUsage") or {}).items():
            key = (str(flavors.get(resource, "")), resource)
            usage[key] = usage.get(key, Decimal(0)) + (quantities.try_parse(raw) or Decimal(0))
    return usage


def add_usage(total: Usage, more: Usage, sign: int = 1) -> Usage:
    result = dict(total)
    for key, value in more.items():
        result[key] = result.get(key, Decimal(0)) + sign * value
    return result


@dataclass
class Assignment:
    """Either pod set assignments (and the usage they add) or the reason nothing was assigned."""

    pod_sets: list[Obj] = field(default_factory=list)
    usage: Usage = field(default_factory=dict)
    message: str = ""

    @property
    def fits(self) -> bool:
        return not self.message


def assign_flavors(workload: Obj, cluster_queue: Obj, used: Usage) -> Assignment:
    """Assign every pod set of ``workload`` a flavor per resource group, given the queue's ``used`` quota."""
    quota = nominal_quota(cluster_queue)
    groups = (cluster_queue.get("spec") or {}).get("resourceGroups") or []
    result = Assignment()
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        name = str(pod_set.get("name", "main"))
        requests = pod_set_requests(pod_set)
        flavors: dict[str, str] = {}
        reasons: list[str] = []
        for resource in requests:
            if flavors.get(resource):
                continue
            group = next((g for g in groups if resource in (g.get("coveredResources") or [])), None)
            if group is None:
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                continue
            wanted = {r: v for r, v in requests.items() if r in (group.get("coveredResources") or [])}
            chosen, why = _first_fitting_flavor(group, wanted, quota, add_usage(used, result.usage))
            if chosen is None:
                reasons.extend(why)
            else:
                flavors.update(dict.fromkeys(wanted, chosen))
        if reasons:
            detail = ", ".join(sorted(set(reasons)))
            return Assignment(message=f"couldn't assign flavors to pod set {name}: {detail}")
        added = {(flavors[r], r): v for r, v in requests.items()}
        result.usage = add_usage(result.usage, added)
        result.pod_sets.append(
            {
                "name": name,
                "flavors": flavors,
                "resourceUsage": {r: quantity_string(r, v) for r, v in requests.items()},
                "count": int(pod_set.get("count", 1)),
            }
        )
    return result


def _first_fitting_flavor(
    group: Obj, wanted: dict[str, Decimal], quota: Usage, used: Usage
) -> tuple[str | None, list[str]]:
    reasons: list[str] = []
    for flavor in group.get("flavors") or []:
        name = str(flavor.get("name"))
        problems = [p for r, v in wanted.items() if (p := _lack(name, r, v, quota, used))]
        if not problems:
            return name, []
        reasons.extend(problems)
    return None, reasons


def _lack(flavor: str, resource: str, value: Decimal, quota: Usage, used: Usage) -> str:
    """Why ``value`` of ``resource`` does not fit in ``flavor`` ('' when it does), in upstream's words."""
    nominal = quota.get((flavor, resource))
    if nominal is None:
        return f"resource {resource} unavailable in flavor {flavor}"
    taken = used.get((flavor, resource), Decimal(0))
    if value > nominal:
        return (
            f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity "
            f"({quantity_string(resource, value)} > {quantity_string(resource, nominal)})"
        )
    if taken + value > nominal:
        more = quantity_string(resource, taken + value - nominal)
        return f"insufficient unused quota for {resource} in flavor {flavor}, {more} more needed"
    return ""
