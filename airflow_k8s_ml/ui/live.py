"""A waiting workload's live state and deadline phase, read from Kubernetes for the Training tab.

Why read the cluster at all: while a task is deferred, Airflow's database knows the workload's identity and
its budgets, not whether it is queued for a GPU, pulling its image or training - that lives in the
trigger's memory. Two reads (the workload, its pods) classified by the same pure functions the trigger uses
(``status.classify``, ``deadline_phase``, ``phase_hints``) give the same answer the trigger acts on.

Best effort and bounded: one attempt, a short timeout, no retries; any failure becomes a note on the page
(the recorded facts still show). Imported only by the api-server, and only when the tab asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LiveStatus", "read_live"]

#: Seconds one read may take; the tab must answer quickly even when the cluster does not.
READ_TIMEOUT = 3.0


@dataclass(frozen=True)
class LiveStatus:
    """The workload now: its state payload, the deadline phase, and when that phase (and running) began."""

    state: dict[str, Any]
    phase: str
    phase_since: float | None
    running_since: float | None
    exists: bool = True


def read_live(kubernetes_conn_id: str, api_version: str, kind: str, name: str, namespace: str) -> LiveStatus:
    """Read and classify the workload; raises (ApiError, connection errors) for the caller to report."""
    from airflow_k8s_ml.kube.retry import RetryPolicy
    from airflow_k8s_ml.kube.sync_client import KubeClient
    from airflow_k8s_ml.status import classify, deadline_phase
    from airflow_k8s_ml.status.clock import phase_hints
    from airflow_k8s_ml.status.pod import owned_by

    client = KubeClient(
        kubernetes_conn_id, namespace, retry=RetryPolicy(backoffs=()), request_timeout=READ_TIMEOUT
    )
    try:
        obj = client.get(api_version, kind, name, namespace)
        if obj is None:
            return LiveStatus(
                {"phase": "pending", "reason": "NotFound", "message": ""}, "gone", None, None, False
            )
        state = classify(obj, kind)
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        pods = [p for p in client.pods_of(kind, name, namespace) if owned_by(p, uid)]
        phase = deadline_phase(state, pods)
        since, running = phase_hints(phase, obj, pods)
        return LiveStatus(state.to_payload(), phase, since, running)
    finally:
        client.close()
