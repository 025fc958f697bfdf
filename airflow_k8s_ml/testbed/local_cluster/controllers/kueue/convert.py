"""Kueue's conversion between kueue.x-k8s.io/v1beta2 (storage) and v1beta1 (served deprecated): pure.

As upstream's conversion webhook (``apis/kueue/v1beta1/*_conversion.go`` and the generated
``zz_generated.conversion.go``): every field both versions know is copied; the renames are converted by
hand, as theirs are; a field only one version knows is dropped on the way to the other (upstream keeps no
annotation for them either):

- ClusterQueue: ``spec.cohort`` <-> ``spec.cohortName``; v1beta1 ``spec.admissionChecks`` (names) ->
  ``spec.admissionChecksStrategy.admissionChecks[].name``; fungibility ``Preempt``/``Borrow`` ->
  ``MayStopSearch``; ``status.pendingWorkloadsStatus`` (v1beta1 only) dropped;
  ``spec.concurrentAdmissionPolicy`` (v1beta2 only) dropped.
- LocalQueue: ``status.flavorUsage`` <-> ``status.flavorsUsage``; v1beta1 ``status.flavors`` dropped.
- Workload: ``spec.priorityClassSource`` + ``spec.priorityClassName`` <-> ``spec.priorityClassRef``
  {group, kind, name}; ``status.accumulatedPastExexcutionTimeSeconds`` (v1beta1's spelling) <->
  ``status.accumulatedPastExecutionTimeSeconds``; ``spec.preemptionGates`` / ``status.preemptionGates``
  (v1beta2 only) dropped. Topology assignments (TAS, not served here) are kept as they are.
- ResourceFlavor, WorkloadPriorityClass: only ``apiVersion``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ...resources import ResourceType
from .api import (
    GROUP,
    POD_PRIORITY_CLASS_REF,
    POD_PRIORITY_CLASS_SOURCE,
    V1BETA1,
    VERSION,
    WORKLOAD_PRIORITY_CLASS_REF,
    WORKLOAD_PRIORITY_CLASS_SOURCE,
)

Obj = dict[str, Any]

_SOURCES = {
    WORKLOAD_PRIORITY_CLASS_SOURCE: WORKLOAD_PRIORITY_CLASS_REF,
    POD_PRIORITY_CLASS_SOURCE: POD_PRIORITY_CLASS_REF,
}
_DEPRECATED_FUNGIBILITY = {"whenCanPreempt": "Preempt", "whenCanBorrow": "Borrow"}


def _rename(section: Obj, old: str, new: str) -> None:
    if old in section:
        section[new] = section.pop(old)


# -- up: v1beta1 -> v1beta2 ------------------------------------------------------------------------------
def _cluster_queue_up(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _rename(spec, "cohort", "cohortName")
        checks = spec.pop("admissionChecks", None)
        if checks:  # after the copy, as upstream: the list wins over a strategy given beside it
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
        fungibility = spec.get("flavorFungibility")
        if isinstance(fungibility, dict):
            for key, deprecated in _DEPRECATED_FUNGIBILITY.items():
                if fungibility.get(key) == deprecated:
                    fungibility[key] = "MayStopSearch"
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("pendingWorkloadsStatus", None)


def _local_queue_up(obj: Obj) -> None:
    status = obj.get("status")
    if isinstance(status, dict):
        _rename(status, "flavorUsage", "flavorsUsage")
        status.pop("flavors", None)


def _workload_up(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        source = spec.pop("priorityClassSource", None)
        name = spec.pop("priorityClassName", None)
        ref = _SOURCES.get(str(source))
        if ref is not None:
            spec["priorityClassRef"] = {**ref, "name": name or ""}
    status = obj.get("status")
    if isinstance(status, dict):
        _rename(status, "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")


# -- down: v1beta2 -> v1beta1 ----------------------------------------------------------------------------
def _cluster_queue_down(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _rename(spec, "cohortName", "cohort")
        spec.pop("concurrentAdmissionPolicy", None)


def _local_queue_down(obj: Obj) -> None:
    status = obj.get("status")
    if isinstance(status, dict):
        _rename(status, "flavorsUsage", "flavorUsage")
        for v1beta2_only in ("admissionFairSharingStatus",):
            status.pop(v1beta2_only, None)


def _workload_down(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        ref = spec.pop("priorityClassRef", None)
        spec.pop("preemptionGates", None)
        if isinstance(ref, dict):
            for source, known in _SOURCES.items():
                if ref.get("group") == known["group"] and ref.get("kind") == known["kind"]:
                    spec["priorityClassSource"] = source
                    spec["priorityClassName"] = ref.get("name", "")
    status = obj.get("status")
    if isinstance(status, dict):
        _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
        status.pop("preemptionGates", None)


_UP: dict[str, Callable[[Obj], None]] = {
    "ClusterQueue": _cluster_queue_up,
    "LocalQueue": _local_queue_up,
    "Workload": _workload_up,
}
_DOWN: dict[str, Callable[[Obj], None]] = {
    "ClusterQueue": _cluster_queue_down,
    "LocalQueue": _local_queue_down,
    "Workload": _workload_down,
}


def convert(obj: Obj, target: ResourceType) -> Obj:
    """``obj`` (either version) as ``target``'s version; a copy, the input untouched. An object already
    at that version is returned as it is."""
    if obj.get("apiVersion") == target.api_version:
        return obj
    out = copy.deepcopy(obj)
    step = _UP if target.version == VERSION else _DOWN if target.version == V1BETA1 else None
    if step is None:
        raise ValueError(f"no conversion of {obj.get('apiVersion')} to {target.api_version}")
    fn = step.get(target.kind)
    if fn is not None:
        fn(out)
    out["apiVersion"] = f"{GROUP}/{target.version}"
    return out
