"""Kueue's mutating webhooks: a queued job is created suspended (upstream's ``jobframework`` webhook,
``manageJobsWithoutQueueName: false``), and ClusterQueue defaults are filled in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .api import BEST_EFFORT_FIFO
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


def default_cluster_queue(obj: Obj, old: Obj | None) -> Obj:
    """The CRD's defaults: BestEffortFIFO, no preemption, ``Borrow``/``TryNextFlavor`` fungibility."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("queueingStrategy", BEST_EFFORT_FIFO)
    spec.setdefault("stopPolicy", "None")
    preemption = spec.setdefault("preemption", {})
    preemption.setdefault("withinClusterQueue", "Never")
    preemption.setdefault("reclaimWithinCohort", "Never")
    fungibility = spec.setdefault("flavorFungibility", {})
    fungibility.setdefault("whenCanBorrow", "Borrow")
    fungibility.setdefault("whenCanPreempt", "TryNextFlavor")
    return obj
