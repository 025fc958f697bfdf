"""Pure status interpretation: any watched object -> :class:`WorkloadState`.

Shared by the trigger, the operator's re-entry (adopt after a crash) and the sensors so "is it done, and why
not?" is answered in exactly one place (:func:`decide`, with the budgets of :class:`Deadlines`). Standard
library only; no I/O.

Exported lazily (see :mod:`airflow_k8s_ml._lazy`): an operator parses its deadlines at DAG parse time with
:mod:`.deadlines` alone, without importing the classifiers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_k8s_ml._lazy import lazy_exports

#: public name -> submodule defining it
_EXPORTS: dict[str, str] = {
    "FAILED": "state",
    "PENDING": "state",
    "RUNNING": "state",
    "SUCCEEDED": "state",
    "Deadlines": "deadlines",
    "Decision": "wait",
    "Expiry": "deadlines",
    "Observation": "wait",
    "PhaseClock": "clock",
    "RolloutStatus": "rollout",
    "Target": "wait",
    "WorkloadState": "state",
    "classify": "classify",
    "classify_cronjob": "cronjob",
    "classify_deployment": "rollout",
    "classify_job": "job",
    "classify_pod": "classify",
    "classify_pytorchjob": "pytorchjob",
    "deadline_phase": "phases",
    "decide": "wait",
    "pod_phase_kind": "pod",
    "pod_problem": "pod",
    "pods_phase_kind": "pod",
    "pods_problems": "pod",
    "rollout_status": "rollout",
    "scheduling_message": "pod",
}

__all__ = [
    "FAILED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "Deadlines",
    "Decision",
    "Expiry",
    "Observation",
    "PhaseClock",
    "RolloutStatus",
    "Target",
    "WorkloadState",
    "classify",
    "classify_cronjob",
    "classify_deployment",
    "classify_job",
    "classify_pod",
    "classify_pytorchjob",
    "deadline_phase",
    "decide",
    "pod_phase_kind",
    "pod_problem",
    "pods_phase_kind",
    "pods_problems",
    "rollout_status",
    "scheduling_message",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_k8s_ml.status.classify import classify, classify_pod
    from airflow_k8s_ml.status.clock import PhaseClock
    from airflow_k8s_ml.status.cronjob import classify_cronjob
    from airflow_k8s_ml.status.deadlines import Deadlines, Expiry
    from airflow_k8s_ml.status.job import classify_job
    from airflow_k8s_ml.status.phases import deadline_phase
    from airflow_k8s_ml.status.pod import (
        pod_phase_kind,
        pod_problem,
        pods_phase_kind,
        pods_problems,
        scheduling_message,
    )
    from airflow_k8s_ml.status.pytorchjob import classify_pytorchjob
    from airflow_k8s_ml.status.rollout import RolloutStatus, classify_deployment, rollout_status
    from airflow_k8s_ml.status.state import FAILED, PENDING, RUNNING, SUCCEEDED, WorkloadState
    from airflow_k8s_ml.status.wait import Decision, Observation, Target, decide
