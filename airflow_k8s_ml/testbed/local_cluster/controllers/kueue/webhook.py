"""Kueue's mutating webhooks: a queued job is created suspended (upstream's ``jobframework`` webhook,
``manageJobsWithoutQueueName: false``), and ClusterQueue defaults are filled in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import errors
from .api import BEST_EFFORT_FIFO, CLUSTER_QUEUES, GROUP, LOCAL_QUEUES, STRICT_FIFO
from .integrations import Integration, is_suspended, managed, set_suspended

Obj = dict[str, Any]
Admission = Callable[[Obj, Obj | None], Obj]


def suspend_queued(integration: Integration) -> Admission:
    """At create, a job carrying the queue-name label is suspended until its Workload is admitted."""

    def admit(obj: Obj, old: Obj | None) -> Obj:
        if old is None and managed(integration, obj) and not is_suspended(integration, obj):
            set_suspended(integration, obj, True)
        return obj

    return admit


_ENUMS = (
    ("queueingStrategy", (STRICT_FIFO, BEST_EFFORT_FIFO)),
    ("preemption.withinClusterQueue", ("Never", "LowerPriority", "LowerOrNewerEqualPriority")),
)


def _unsupported(field: str, value: object, allowed: tuple[str, ...]) -> tuple[str, str, str]:
    supported = ", ".join(f'"{v}"' for v in allowed)
    return (field, "FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {supported}')


def default_cluster_queue(obj: Obj, old: Obj | None) -> Obj:
    """The v1beta2 CRD's defaults (BestEffortFIFO, no preemption, ``MayStopSearch``/``TryNextFlavor``
    fungibility), then its enum checks as 422 Invalid. Runs on the stored (v1beta2) form: a v1beta1
    ``Borrow`` arrives converted to ``MayStopSearch``."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("queueingStrategy", BEST_EFFORT_FIFO)
    spec.setdefault("stopPolicy", "None")
    preemption = spec.setdefault("preemption", {})
    preemption.setdefault("withinClusterQueue", "Never")
    preemption.setdefault("reclaimWithinCohort", "Never")
    fungibility = spec.setdefault("flavorFungibility", {})
    fungibility.setdefault("whenCanBorrow", "MayStopSearch")
    fungibility.setdefault("whenCanPreempt", "TryNextFlavor")
    problems = []
    for path, allowed in _ENUMS:
        head, _, tail = path.partition(".")
        value = (spec.get(head) or {}).get(tail) if tail else spec.get(head)
        if value not in allowed:
            problems.append(_unsupported(f"spec.{path}", value, allowed))
    if problems:
        name = obj.get("metadata", {}).get("name", "")
        raise errors.invalid("ClusterQueue", GROUP, CLUSTER_QUEUES.plural, name, problems)
    return obj


def validate_local_queue(obj: Obj, old: Obj | None) -> Obj:
    """``spec.clusterQueue`` is immutable (the CRD's CEL rule)."""
    before = ((old or {}).get("spec") or {}).get("clusterQueue")
    if old is not None and (obj.get("spec") or {}).get("clusterQueue") != before:
        name = obj.get("metadata", {}).get("name", "")
        problem = ("spec.clusterQueue", "FieldValueInvalid", 'Invalid value: "string": field is immutable')
        raise errors.invalid("LocalQueue", GROUP, LOCAL_QUEUES.plural, name, [problem])
    return obj
