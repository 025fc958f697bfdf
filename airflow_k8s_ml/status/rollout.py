"""Deployment rollout progress with exactly the logic and messages of ``kubectl rollout status``.

Ported from kubectl's ``polymorphichelpers/rollout_status.go`` (``DeploymentStatusViewer.Status``) so that our
wait, the task log and a human running kubectl agree word for word. kubectl prints each message followed by a
newline; we keep the text without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.status._conditions import count, find, status_of
from airflow_k8s_ml.status.state import FAILED, PENDING, RUNNING, SUCCEEDED, WorkloadState

__all__ = [
    "REVISION_ANNOTATION",
    "TIMED_OUT_REASON",
    "RolloutStatus",
    "classify_deployment",
    "rollout_status",
]

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
#: deploymentutil.TimedOutReason
TIMED_OUT_REASON = "ProgressDeadlineExceeded"


@dataclass(frozen=True, slots=True)
class RolloutStatus:
    """``done``: rolled out; ``failed``: kubectl would exit with an error; else still waiting."""

    done: bool
    failed: bool
    message: str

    def to_state(self, details: Mapping[str, Any] | None = None) -> WorkloadState:
        extra = dict(details or {})
        if self.failed:
            reason = TIMED_OUT_REASON if "progress deadline" in self.message else "RolloutFailed"
            return WorkloadState(FAILED, reason, self.message, extra)
        if self.done:
            return WorkloadState(SUCCEEDED, "RolledOut", self.message, extra)
        if self.message.startswith("Waiting for deployment spec update"):
            return WorkloadState(PENDING, "SpecUpdatePending", self.message, extra)
        return WorkloadState(RUNNING, "RollingOut", self.message, extra)


def _go_quote(name: str) -> str:
    """Go's ``%q`` for the characters a Deployment name can contain (RFC 1123 subdomain)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def deployment_revision(deployment: Mapping[str, Any]) -> int:
    """``deploymentutil.Revision``: the revision annotation, 0 when absent."""
    annotations = (deployment.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(REVISION_ANNOTATION)
    return int(value) if value is not None else 0


def rollout_status(deployment: Mapping[str, Any], revision: int | None = None) -> RolloutStatus:
    """One evaluation of ``kubectl rollout status deployment/<name> [--revision=N]``."""
    metadata = deployment.get("metadata") or {}
    name = _go_quote(str(metadata.get("name", "")))
    if revision:
        try:
            current = deployment_revision(deployment)
        except ValueError as exc:
            return RolloutStatus(False, True, f"cannot get the revision of deployment {name}: {exc}")
        if revision != current:
            return RolloutStatus(
                False,
                True,
                f"desired revision ({revision}) is different from the running revision ({current})",
            )
    status = status_of(deployment)
    generation = metadata.get("generation") or 0
    if generation <= count(status, "observedGeneration"):
        progressing = find(deployment, "Progressing")
        if progressing is not None and progressing.get("reason") == TIMED_OUT_REASON:
            return RolloutStatus(False, True, f"deployment {name} exceeded its progress deadline")
        wanted = (deployment.get("spec") or {}).get("replicas")
        updated = count(status, "updatedReplicas")
        replicas = count(status, "replicas")
        available = count(status, "availableReplicas")
        waiting = f"Waiting for deployment {name} rollout to finish: "
        if wanted is not None and updated < wanted:
            return RolloutStatus(
                False, False, f"{waiting}{updated} out of {wanted} new replicas have been updated..."
            )
        if replicas > updated:
            return RolloutStatus(
                False, False, f"{waiting}{replicas - updated} old replicas are pending termination..."
            )
        if available < updated:
            return RolloutStatus(
                False, False, f"{waiting}{available} of {updated} updated replicas are available..."
            )
        return RolloutStatus(True, False, f"deployment {name} successfully rolled out")
    return RolloutStatus(False, False, "Waiting for deployment spec update to be observed...")


def classify_deployment(deployment: Mapping[str, Any]) -> WorkloadState:
    """The rollout as a :class:`WorkloadState` (succeeded = rolled out), with replica counts in details."""
    status = status_of(deployment)
    details: dict[str, Any] = {
        key: count(status, key)
        for key in (
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
        )
    }
    with contextlib.suppress(ValueError):
        details["revision"] = deployment_revision(deployment)
    return rollout_status(deployment).to_state(details)
