"""The worker's wait, by its old import path: it lives in :mod:`airflow_k8s_ml.triggers.sync_wait` (beside
the trigger, so the operators and the sensors wait through the same public module) and the waiting arguments
in :mod:`airflow_k8s_ml.operators.wait_settings`; both re-exported here for code that imports them from here.
"""

from __future__ import annotations

from airflow_k8s_ml.operators.wait_settings import WaitSettings, check_wait_args
from airflow_k8s_ml.triggers.sync_wait import (
    WorkloadLooker,
    as_deleted,
    delete_and_wait,
    poll_until_done,
    raise_for_event,
    settled_state,
    with_diagnostics,
)

__all__ = [
    "WaitSettings",
    "WorkloadLooker",
    "as_deleted",
    "check_wait_args",
    "delete_and_wait",
    "poll_until_done",
    "raise_for_event",
    "settled_state",
    "with_diagnostics",
]
