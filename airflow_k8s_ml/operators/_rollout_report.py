"""How a rollout's failure and rollback are worded (pure), so the task's message answers "why, and what
serves now?" without ``kubectl describe``; the operator only gathers the facts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.errors import DeadlineExceeded, WorkloadFailed
from airflow_k8s_ml.manifests.serving import MODEL_URI_LABEL
from airflow_k8s_ml.operators._rollback import revision_of
from airflow_k8s_ml.status import WorkloadState, pod_problem

__all__ = [
    "failure_reason",
    "pod_trouble",
    "revision",
    "rollback_message",
    "rollout_error",
    "served_model",
]


def revision(deployment: Mapping[str, Any] | None) -> int:
    """The Deployment's revision annotation; 0 when there is none (or no Deployment)."""
    return (revision_of(deployment) or 0) if deployment else 0


def served_model(deployment: Mapping[str, Any] | None) -> str | None:
    """The model URI of the Deployment's current pod template (what its new pods run)."""
    template = ((deployment or {}).get("spec") or {}).get("template") or {}
    return ((template.get("metadata") or {}).get("annotations") or {}).get(MODEL_URI_LABEL)


def pod_trouble(pod: Mapping[str, Any]) -> str | None:
    """``pod_problem``, or a container that restarted after a non-zero exit (between crash-loop back-offs
    the current instance looks healthy while it starts again)."""
    problem = pod_problem(pod)
    if problem:
        return problem
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        last = (status.get("lastState") or {}).get("terminated") or {}
        if status.get("restartCount") and last.get("exitCode") not in (None, 0):
            reason = f" ({last['reason']})" if last.get("reason") else ""
            return (
                f"container {status.get('name')} restarted {status['restartCount']} time(s), "
                f"last exit code {last['exitCode']}{reason}"
            )
    return None


def failure_reason(outcome: str, revision: int, state: WorkloadState, message: str) -> str:
    """``rollout of revision 2 failed (ProgressDeadlineExceeded): deployment "x" exceeded its progress
    deadline`` or ``rollout of revision 2 did not finish: deadline 15m exceeded: ...``."""
    if outcome == "deadline":
        return f"rollout of revision {revision} did not finish: {message}"
    why = f"({state.reason}): {state.message}" if state.reason and state.message else message
    return f"rollout of revision {revision} failed {why}"


def rollback_message(
    reason: str, to_revision: int, serving: int, model: str | None, healthy: bool, detail: str = ""
) -> str:
    """The final failure after a rollback: which revision serves now (and whether it is healthy)."""
    if healthy:
        return (
            f"{reason}; rolled back: revision {serving} (the template of revision {to_revision}, model "
            f"{model}) is serving"
        )
    return (
        f"{reason}; rolled back to the template of revision {to_revision} (now revision {serving}, model "
        f"{model}) but it is not healthy: {detail}"
    )


def rollout_error(message: str, *, deadline: bool) -> WorkloadFailed:
    """An expired Airflow-side deadline is a ``DeadlineExceeded`` (phase ``rollout``), the rest a failure."""
    return DeadlineExceeded("rollout_timeout", message) if deadline else WorkloadFailed(message)
