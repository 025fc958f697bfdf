"""Airflow operators of airflow-k8s-ml, exported lazily.

Why lazy: DAG files import ``from airflow_k8s_ml.operators import FineTuneJobOperator`` at parse time, many
times a minute. A name is imported from its module on first access only, so using one operator never pays for
the others, and nothing here imports ``kubernetes``, ``boto3`` or ``torch`` (those load inside ``execute``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> submodule defining it
_EXPORTS: dict[str, str] = {
    "BatchInferenceCronJobOperator": "batch_inference",
    "BatchInferenceJobOperator": "batch_job",
    "CheckpointCheckOperator": "checkpoint",
    "FineTuneJobOperator": "training",
    "InferenceDeploymentOperator": "inference",
    "PyTorchJobOperator": "training",
    "TFJobOperator": "tfjob",
    "TrainJobOperator": "trainjob",
}

__all__ = [
    "BatchInferenceCronJobOperator",
    "BatchInferenceJobOperator",
    "CheckpointCheckOperator",
    "FineTuneJobOperator",
    "InferenceDeploymentOperator",
    "PyTorchJobOperator",
    "TFJobOperator",
    "TrainJobOperator",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_k8s_ml.operators.batch_inference import BatchInferenceCronJobOperator
    from airflow_k8s_ml.operators.batch_job import BatchInferenceJobOperator
    from airflow_k8s_ml.operators.checkpoint import CheckpointCheckOperator
    from airflow_k8s_ml.operators.inference import InferenceDeploymentOperator
    from airflow_k8s_ml.operators.tfjob import TFJobOperator
    from airflow_k8s_ml.operators.training import FineTuneJobOperator, PyTorchJobOperator
    from airflow_k8s_ml.operators.trainjob import TrainJobOperator
