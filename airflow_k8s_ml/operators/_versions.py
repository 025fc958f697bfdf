"""Model versions: which model each Deployment revision serves, and choosing one to deploy again. Pure.

Why in the pod template: each revision of a Deployment is a ReplicaSet holding a copy of the pod template
(``kubectl rollout history`` reads them), so a record written there - an annotation
:data:`MODEL_RECORD_ANNOTATION` with the model URI, its metrics and the Airflow run that deployed it - is kept
per revision by Kubernetes itself, for as long as ``revisionHistoryLimit`` keeps the ReplicaSet, and is
restored with the template by a rollback. Nothing else has to be stored.

Why the record of an unchanged model is the live one: the run that deployed a model is part of the template,
so a later run deploying the *same* model must keep the record it finds, or every run would roll the pods.
``rollback_to`` reuses a recorded revision's model and record verbatim: the template is then that revision's
again (given the same other arguments), and the Deployment controller takes its ReplicaSet back, as it does
for ``kubectl rollout undo``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.naming import ANNOTATION_PREFIX

__all__ = [
    "MODEL_RECORD_ANNOTATION",
    "choose_revision",
    "history",
    "model_metrics",
    "new_record",
    "record_for",
    "with_model_record",
]

MODEL_RECORD_ANNOTATION = f"{ANNOTATION_PREFIX}model-record"
_MODEL_URI = f"{ANNOTATION_PREFIX}model-uri"
_REVISION = "deployment.kubernetes.io/revision"


def model_metrics(value: Any) -> dict[str, Any]:
    """What the checkpoint gate's XCom says of the model besides its URI (``step``, ``metrics``); {} for
    a plain URI."""
    if not isinstance(value, Mapping):
        return {}
    return {key: value[key] for key in ("step", "metrics") if value.get(key) is not None}


def new_record(model_uri: str, metrics: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a model deployed by this run (``run``: dag_id, task_id, run_id)."""
    return {
        "model_uri": model_uri,
        **dict(metrics),
        **{key: run[key] for key in ("dag_id", "task_id", "run_id")},
    }


def _template_annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    template = ((obj or {}).get("spec") or {}).get("template") or {}
    return (template.get("metadata") or {}).get("annotations") or {}


def _read_record(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    text = _template_annotations(obj).get(MODEL_RECORD_ANNOTATION)
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def record_for(
    live: Mapping[str, Any] | None, model_uri: str, fresh: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The record to write: the live one when the live template already serves ``model_uri`` (None when it
    has none: a Deployment made before records, left unchanged), else ``fresh``."""
    if live is not None and _template_annotations(live).get(_MODEL_URI) == model_uri:
        return _read_record(live)
    return dict(fresh)


def with_model_record(
    objects: list[dict[str, Any]], record: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The objects with ``record`` in the Deployment's pod template (compact, key-sorted JSON: the same
    record is always the same text, so an unchanged model changes nothing)."""
    if record is None:
        return objects
    text = json.dumps(dict(record), sort_keys=True, separators=(",", ":"))
    for obj in objects:
        if obj.get("kind") == "Deployment":
            meta = obj["spec"]["template"].setdefault("metadata", {})
            meta.setdefault("annotations", {})[MODEL_RECORD_ANNOTATION] = text
    return objects


def _revision(obj: Mapping[str, Any]) -> int | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(_REVISION)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def history(deployment: Mapping[str, Any] | None, replica_sets: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Each recorded revision, newest first: ``revision``, ``model_uri``, ``record`` (None before records),
    ``serving`` (the Deployment's current revision)."""
    current = _revision(deployment) if deployment is not None else None
    out = []
    for rs in replica_sets:
        revision = _revision(rs)
        if revision is None:
            continue
        out.append(
            {
                "revision": revision,
                "model_uri": _template_annotations(rs).get(_MODEL_URI),
                "record": _read_record(rs),
                "serving": revision == current,
            }
        )
    return sorted(out, key=lambda entry: -entry["revision"])


def choose_revision(entries: list[dict], rollback_to: Any) -> dict:
    """The entry ``rollback_to`` names: a revision number, or ``"previous"`` (the newest revision before
    the serving one). Anything else, or a revision not (or no longer) recorded, is a ValidationError naming
    ``rollback_to`` and what there is: raised before anything is changed."""
    known = ", ".join(str(entry["revision"]) for entry in entries) or "none"
    if isinstance(rollback_to, str) and rollback_to.strip().lower() == "previous":
        serving = next((entry["revision"] for entry in entries if entry["serving"]), None)
        older = [entry for entry in entries if serving is None or entry["revision"] < serving]
        if serving is None or not older:
            raise ValidationError(
                "rollback_to", f"'previous': no revision before the serving one (recorded: {known})"
            )
        return older[0]
    if isinstance(rollback_to, str) and rollback_to.strip().isdigit():
        rollback_to = int(rollback_to)
    if isinstance(rollback_to, bool) or not isinstance(rollback_to, int):
        raise ValidationError("rollback_to", f"must be a revision number or 'previous', got {rollback_to!r}")
    for entry in entries:
        if entry["revision"] == rollback_to:
            if not entry["model_uri"]:
                raise ValidationError("rollback_to", f"revision {rollback_to} records no model")
            return entry
    raise ValidationError("rollback_to", f"no revision {rollback_to} is recorded (recorded: {known})")
