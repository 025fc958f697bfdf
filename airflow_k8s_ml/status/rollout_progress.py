"""One log line per change of a Deployment rollout's replica counts. Pure.

Why: a deferred deploy used to print nothing between "waiting for the rollout" and the result, so a slow
rollout looked like a hung task. The trigger re-evaluates the Deployment on every change of it or its pods
(many changes say nothing new), so the line is only produced when a count changed: the pace of the rollout
itself, a handful of lines per deploy. The wording ends with ``kubectl rollout status``'s own message, so
the task log and a human running kubectl agree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.status._conditions import count, status_of
from airflow_k8s_ml.status.rollout import deployment_revision, rollout_status

__all__ = ["RolloutProgress", "progress_line", "rollout_progress"]


@dataclass(frozen=True, slots=True)
class RolloutProgress:
    """The counts a rollout moves through (``status`` of the Deployment) and the revision rolling out."""

    revision: int
    wanted: int | None
    updated: int
    ready: int
    available: int
    total: int
    observed: bool


def rollout_progress(deployment: Mapping[str, Any]) -> RolloutProgress:
    status = status_of(deployment)
    revision = 0
    with contextlib.suppress(ValueError):
        revision = deployment_revision(deployment)
    generation = (deployment.get("metadata") or {}).get("generation") or 0
    wanted = (deployment.get("spec") or {}).get("replicas")
    return RolloutProgress(
        revision=revision,
        wanted=None if wanted is None else int(wanted),
        updated=count(status, "updatedReplicas"),
        ready=count(status, "readyReplicas"),
        available=count(status, "availableReplicas"),
        total=count(status, "replicas"),
        observed=generation <= count(status, "observedGeneration"),
    )


def _describe(progress: RolloutProgress, message: str) -> str:
    revision = f"revision {progress.revision}" if progress.revision else "new revision"
    if not progress.observed:  # the counts are still those of the previous spec: they would mislead
        return f"rollout {revision}: {message}"
    wanted = "?" if progress.wanted is None else str(progress.wanted)
    old = progress.total - progress.updated
    counts = (
        f"{progress.updated}/{wanted} updated, {progress.ready} ready, {progress.available} available"
        + (f", {old} old" if old > 0 else "")
    )
    return f"rollout {revision}: {counts} - {message}"


def progress_line(
    deployment: Mapping[str, Any], previous: RolloutProgress | None
) -> tuple[RolloutProgress, str | None]:
    """The Deployment's progress now, and the line to log if it differs from ``previous`` (else None).

    ``rollout revision 2: 1/2 updated, 2 ready, 1 available, 1 old - Waiting for deployment "digits"
    rollout to finish: 1 of 2 updated replicas are available...``
    """
    progress = rollout_progress(deployment)
    if progress == previous:
        return progress, None
    return progress, _describe(progress, rollout_status(deployment).message)
