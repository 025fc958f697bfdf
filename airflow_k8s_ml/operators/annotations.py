"""Annotations the operators write on the workloads they create, and read back (pure constants).

Why a module of its own: the operators write them at launch, the adopt path and the sensor read them, and
the parse-time path needs them without loading anything else.
"""

from __future__ import annotations

__all__ = ["RESUMED_FROM_ANNOTATION"]

#: The checkpoint an attempt resumed from, so a result can be rebuilt from the object.
RESUMED_FROM_ANNOTATION = "airflow-k8s-ml/resumed-from"
