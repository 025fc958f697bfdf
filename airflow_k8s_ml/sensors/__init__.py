"""Airflow sensors of airflow-k8s-ml, exported lazily (see :mod:`airflow_k8s_ml.operators` for why)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_k8s_ml._lazy import lazy_exports

#: public name -> submodule defining it
_EXPORTS: dict[str, str] = {
    "CheckpointSensor": "checkpoint",
    "TrainingJobSensor": "training",
}

__all__ = ["CheckpointSensor", "TrainingJobSensor"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from airflow_k8s_ml.sensors.checkpoint import CheckpointSensor
    from airflow_k8s_ml.sensors.training import TrainingJobSensor
