"""kubeflow.org/v1 TFJob status -> :class:`WorkloadState`: the training operator's common job status, read
as the PyTorchJob's is (:func:`~airflow_k8s_ml.status.pytorchjob.classify_kubeflow_job`), with TFJob's
reasons (``TFJobSucceeded``, ``TFJobFailed``: "TFJob ns/name has failed because 1 Worker replica(s)
failed.")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.status.pytorchjob import classify_kubeflow_job
from airflow_k8s_ml.status.state import WorkloadState

__all__ = ["classify_tfjob"]


def classify_tfjob(job: Mapping[str, Any]) -> WorkloadState:
    return classify_kubeflow_job(job, "TFJob")
