"""One error tree for the whole package.

Operators, manifests, checkpoints and the local cluster raise these (never bare ``Exception``) so callers can
catch by meaning: a :class:`ValidationError` always means "bad input, nothing was created".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class K8sMLError(Exception):
    """Base of every error this package raises on purpose."""


class ValidationError(K8sMLError, ValueError):
    """Invalid user input. Raised before any API call, so nothing exists on the cluster.

    ``field`` names the offending argument or manifest path (``spec.template.spec.containers[0].image``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class WorkloadFailed(K8sMLError):
    """A workload reached a terminal failed state (or was failed by an Airflow-side deadline)."""


class DeadlineExceeded(WorkloadFailed):
    """An Airflow-side deadline expired; ``deadline`` names it as the user wrote it: ``admission_timeout``,
    ``startup_timeout``, ``run_timeout``, ``deadline`` (or ``rollout_timeout`` for a model deployment)."""

    def __init__(self, deadline: str, message: str) -> None:
        super().__init__(message)
        self.deadline = deadline


class CheckpointError(K8sMLError):
    """A checkpoint is missing, incomplete or corrupt, or a commit lost a race."""


class MetricGateFailed(CheckpointError):
    """A checkpoint's metrics did not satisfy the rules."""


class ApiError(K8sMLError):
    """The Kubernetes API server answered ``status`` (a ``Status`` with ``reason`` and ``message``).

    ``status == 0`` means no HTTP answer (connection refused, reset, timed out). Built from an answer in
    one place (:func:`airflow_k8s_ml.kube.errors.api_error`); the sync and async clients and the watch all
    raise this one class, so callers catch one thing whatever the transport.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        retry_after: float | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.details = dict(details or {})

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        """410 Expired: a resourceVersion older than the server's history; re-list."""
        return self.status == 410
