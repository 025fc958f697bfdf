"""``classify(obj)``: one entry point from any watched object to a :class:`WorkloadState`.

Objects are plain dicts as the API server sends them (JSON). Items of a list response carry no ``kind``: pass
it explicitly (``classify(item, kind="Job")``). Kubernetes client model objects must be converted first
(``ApiClient().sanitize_for_serialization(model)``), which keeps this module free of client imports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.status._conditions import status_of
from airflow_k8s_ml.status.cronjob import classify_cronjob
from airflow_k8s_ml.status.job import classify_job
from airflow_k8s_ml.status.pod import pod_problem
from airflow_k8s_ml.status.pytorchjob import classify_pytorchjob
from airflow_k8s_ml.status.rollout import classify_deployment
from airflow_k8s_ml.status.state import FAILED, PENDING, RUNNING, SUCCEEDED, WorkloadState
from airflow_k8s_ml.status.tfjob import classify_tfjob
from airflow_k8s_ml.status.trainjob import classify_trainjob

__all__ = ["CLASSIFIERS", "classify", "classify_pod"]


def classify_pod(pod: Mapping[str, Any]) -> WorkloadState:
    """Pod phase as a state; the reason/message come from :func:`pod_problem` when something is wrong."""
    status = status_of(pod)
    phase = status.get("phase") or "Pending"
    problem = pod_problem(pod) or ""
    if phase == "Succeeded":
        return WorkloadState(SUCCEEDED, "Succeeded", "")
    if phase == "Failed":
        return WorkloadState(FAILED, str(status.get("reason") or "Failed"), problem)
    if phase in ("Running", "Unknown"):
        return WorkloadState(RUNNING, str(phase), problem)
    return WorkloadState(PENDING, "Pending", problem)


#: kind -> (API group, classifier). Dispatch is on the kind; the group, when the object has an apiVersion,
#: must match so that, say, a foreign ``Job`` CRD is not read as a batch/v1 Job.
CLASSIFIERS: dict[str, tuple[str, Callable[[Mapping[str, Any]], WorkloadState]]] = {
    "Job": ("batch", classify_job),
    "PyTorchJob": ("kubeflow.org", classify_pytorchjob),
    "TFJob": ("kubeflow.org", classify_tfjob),
    "TrainJob": ("trainer.kubeflow.org", classify_trainjob),
    "Deployment": ("apps", classify_deployment),
    "CronJob": ("batch", classify_cronjob),
    "Pod": ("", classify_pod),
}


def classify(obj: Mapping[str, Any], kind: str | None = None) -> WorkloadState:
    """Interpret ``obj``'s status; raises ``ValidationError('kind', ...)`` for kinds we do not interpret."""
    kind = kind or obj.get("kind")
    entry = CLASSIFIERS.get(str(kind))
    if entry is None:
        raise ValidationError(
            "kind", f"cannot classify kind {kind!r}; supported: {', '.join(sorted(CLASSIFIERS))}"
        )
    group, classifier = entry
    api_version = obj.get("apiVersion")
    if api_version:
        actual_group = api_version.rpartition("/")[0] if "/" in api_version else ""
        if actual_group != group:
            raise ValidationError(
                "apiVersion", f"cannot classify {api_version} {kind}: expected group {group!r}"
            )
    return classifier(obj)
