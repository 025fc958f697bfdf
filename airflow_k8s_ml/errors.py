"""One error tree for the whole package.

Operators, manifests, checkpoints and the local cluster raise these (never bare ``Exception``) so callers can
catch by meaning: a :class:`ValidationError` always means "bad input, nothing was created".
"""

from __future__ import annotations


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
