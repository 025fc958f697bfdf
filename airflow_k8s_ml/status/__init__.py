"""Pure status interpretation: any watched object -> :class:`WorkloadState`.

Shared by the trigger, the operator's re-entry (adopt after a crash) and the sensors so "is it done, and why
not?" is answered in exactly one place: :func:`decide`, with the budgets of
:class:`airflow_k8s_ml.deadlines.Deadlines`. Standard library only; no I/O.
"""

from __future__ import annotations

from airflow_k8s_ml.status.classify import classify, classify_pod
from airflow_k8s_ml.status.clock import PhaseClock
from airflow_k8s_ml.status.cronjob import classify_cronjob
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

__all__ = [
    "FAILED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "Decision",
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
