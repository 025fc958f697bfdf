"""Airflow sensors of airflow-k8s-ml, exported lazily (see :mod:`airflow_k8s_ml.operators` for why)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> submodule defining it
_EXPORTS: dict[str, str] = {
    "CheckpointSensor": "checkpoint",
    "TrainingJobSensor": "training",
}

__all__ = ["CheckpointSensor", "TrainingJobSensor"]


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
    from airflow_k8s_ml.sensors.checkpoint import CheckpointSensor
    from airflow_k8s_ml.sensors.training import TrainingJobSensor
