"""The disruptions of an attempt, persisted on the workload, so a restarted trigger counts on from them.

Why persisted, not derived: ``max_disruptions`` counts every pod the cluster took from this attempt, but the
cluster forgets them. A drained pod is deleted (a Job's replacement has another name, a PyTorchJob's the
same name and another uid); a Job's pod failure policy ``Ignore`` keeps it out of ``status.failed``; an
eviction records no Event. Once such a pod is gone, nothing the API serves says it was there, so a trigger
started after a triggerer restart could only count what it sees itself, and the limit could be passed by one
wait's count. The workload object outlives every triggerer, is already watched by the trigger (the
annotation arrives in its watch cache, no extra read) and is deleted with the workload - as the log cursor
(:mod:`.log_cursor`).

What is stored: the annotation :data:`DISRUPTIONS_ANNOTATION` holds ``{"try": <Airflow try number>,
"pods": [{"uid", "pod", "reason", "message", "at", "started"}, ...]}``, oldest first. The try number
scopes it: a retry that adopts a still-running workload counts its own disruptions (the limit is per
attempt), a restarted trigger of the same try counts on from the stored ones.

When it is written: right after a look names a new disruption, before its line is logged: one JSON merge
patch of that one annotation (disruptions are rare: no coalescing). A trigger killed between seeing a
disruption and the patch landing (one round trip) leaves it to the next trigger, which counts it only if its
pod is still in the API. Pure parts (:func:`read_disruptions`, :func:`encode_disruptions`) are unit-tested.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow_k8s_ml.kube.errors import ApiError
from airflow_k8s_ml.kube.resources import Resource
from airflow_k8s_ml.manifests.naming import ANNOTATION_PREFIX
from airflow_k8s_ml.status.disruption import Disruption

__all__ = ["DISRUPTIONS_ANNOTATION", "encode_disruptions", "persist_disruptions", "read_disruptions"]

DISRUPTIONS_ANNOTATION = ANNOTATION_PREFIX + "disruptions"


def read_disruptions(obj: Mapping[str, Any] | None, try_number: int | None) -> tuple[Disruption, ...]:
    """The disruptions persisted on ``obj`` by a wait of try ``try_number``, oldest first; () for another
    try, none, or a value we cannot read (then only what the cluster still shows is counted)."""
    if try_number is None:
        return ()
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(DISRUPTIONS_ANNOTATION)
    if not isinstance(raw, str):
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        return ()
    if (
        not isinstance(value, dict)
        or value.get("try") != try_number
        or not isinstance(value.get("pods"), list)
    ):
        return ()
    pods = [p for p in value["pods"] if isinstance(p, dict) and p.get("uid")]
    return tuple(replace(Disruption.from_payload(p), uid=str(p["uid"])) for p in pods)


def encode_disruptions(try_number: int, disruptions: Sequence[Disruption]) -> str:
    """The annotation value (compact JSON, keys sorted)."""
    pods = [{"uid": d.uid, **d.to_payload()} for d in disruptions]
    return json.dumps({"try": try_number, "pods": pods}, separators=(",", ":"), sort_keys=True)


async def persist_disruptions(
    kube: Any,
    resource: Resource,
    namespace: str,
    name: str,
    try_number: int,
    disruptions: Sequence[Disruption],
    log: Any,
) -> bool:
    """Write the attempt's disruptions onto the workload; False (with a warning) when the API refused (no
    RBAC to patch it, gone): the wait goes on, only a restarted trigger would count from zero."""
    body = {
        "metadata": {"annotations": {DISRUPTIONS_ANNOTATION: encode_disruptions(try_number, disruptions)}}
    }
    try:
        await kube.patch(resource.api_version, resource.kind, name, namespace, body)
    except ApiError as exc:
        log.warning("cannot persist the disruption count (%s); a restarted trigger would count from 0", exc)
        return False
    return True
