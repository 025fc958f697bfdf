"""Pure helpers shared by the serving operators: run identity from the Airflow context, argument coercion.

Why the run labels here omit the attempt: Deployments, Services and CronJobs are long-lived objects that every
run re-applies. Labelling them with the try number would make a plain task retry look like a change
("configured") when nothing about the serving state differs. A run-now Job *is* a per-attempt workload and
gets :meth:`RunKey.labels` (with the attempt) from its operator instead.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import fields
from datetime import timedelta
from typing import Any, TypeVar

from airflow_k8s_ml.manifests.naming import ATTEMPT_LABEL, RunKey
from airflow_k8s_ml.manifests.validation import fail

__all__ = [
    "coerce_dataclass",
    "json_merge",
    "object_labels",
    "resolve_model_uri",
    "run_key",
    "seconds",
    "templated",
]

T = TypeVar("T")


def templated(value: Any) -> bool:
    """True when ``value`` (or anything inside it) still holds an unrendered Jinja expression."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(templated(k) or templated(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(templated(v) for v in value)
    return False


def run_key(context: Mapping[str, Any]) -> RunKey:
    """The task instance of this execution (``context["ti"]``); ``attempt`` is Airflow's try number."""
    ti = context.get("ti") or context.get("task_instance")
    if ti is None:
        raise fail("context", "needs 'ti' (the running task instance) to label objects with the DAG run")
    map_index = getattr(ti, "map_index", -1)
    return RunKey(
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        run_id=ti.run_id,
        map_index=-1 if map_index is None else int(map_index),
        attempt=max(1, int(getattr(ti, "try_number", 1) or 1)),
    )


def object_labels(key: RunKey) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) for a long-lived object: the task instance, without the attempt."""
    annotations = key.annotations()
    annotations.pop(ATTEMPT_LABEL, None)
    return key.task_instance_labels(), annotations


def resolve_model_uri(value: Any, field_name: str = "model_uri") -> str:
    """A URI string, or the checkpoint gate's XCom ``{"uri", "step", ...}`` (its ``uri``)."""
    if isinstance(value, Mapping):
        value = value.get("uri")
    if not isinstance(value, str) or not value.strip():
        raise fail(field_name, f"must be a URI or the checkpoint gate's XCom with a 'uri', got {value!r}")
    return value


def coerce_dataclass(cls: type[T], value: Any, field_name: str) -> T | None:
    """``None``, an instance of ``cls``, or a mapping of its fields (DAG-file friendly, serialisable)."""
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise fail(field_name, f"must be a {cls.__name__} or a mapping, got {type(value).__name__}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(value) - known)
    if unknown:
        raise fail(f"{field_name}.{unknown[0]}", f"unknown key; expected one of {', '.join(sorted(known))}")
    return cls(**value)


def seconds(value: Any, field_name: str) -> float:
    """A positive duration as seconds, from a timedelta or a number."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise fail(field_name, f"must be a positive number of seconds or a timedelta, got {value!r}")
    return float(value)


def json_merge(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch (``None`` deletes a key, lists are replaced): the raw-manifest escape hatch.

    Used for ``deployment_overrides``: anything the typed arguments do not cover (a sidecar, topology spread
    constraints) is merged into the rendered Deployment before it is applied.
    """
    out = copy.deepcopy(dict(target))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = json_merge(out[key], value)
        elif isinstance(value, Mapping):
            out[key] = json_merge({}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out
