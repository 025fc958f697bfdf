"""Which deadline budget a whole workload is spending: admission, startup, running or done.

Why here: phased deadlines (queue/admission, start-up, run time) need one rule combining the workload's own
state (suspended by Kueue = admission) with its pods' states (unschedulable = admission, pulling images =
startup). Keeping it pure lets the trigger and the operator's re-entry charge the same budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_k8s_ml.status.pod import PodPhaseKind, pods_phase_kind
from airflow_k8s_ml.status.state import PENDING, WorkloadState

__all__ = ["SUSPENDED_REASONS", "deadline_phase"]

#: Workload reasons that mean "waiting in a queue": the admission budget (a TrainJob's is upstream's
#: ``Suspended``; its JobSet and Jobs are suspended with it).
SUSPENDED_REASONS = frozenset({"JobSuspended", "PyTorchJobSuspended", "TFJobSuspended", "Suspended"})


def deadline_phase(state: WorkloadState, pods: Iterable[Mapping[str, Any]]) -> PodPhaseKind:
    """Combine the workload state and its current pods into one phase.

    - terminal workload -> ``done``;
    - suspended (queued, e.g. Kueue) -> ``admission``;
    - otherwise the least advanced pod (a gang is only as far as its slowest member);
    - no pods yet: ``admission`` while the workload is pending (e.g. pods forbidden by a quota),
      ``startup`` when it already ran (a replacement pod is due after a failure);
    - all pods finished but the workload not terminal (backoff delay before a retry) -> ``startup``.
    """
    if state.terminal:
        return "done"
    if state.reason in SUSPENDED_REASONS:
        return "admission"
    kind = pods_phase_kind(pods)
    if kind is None:
        return "admission" if state.phase == PENDING else "startup"
    if kind == "done":
        return "startup"
    return kind
