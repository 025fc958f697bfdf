"""The ``/scale`` subresource of Deployments and ReplicaSets: an autoscaling/v1 ``Scale`` view.

``kubectl scale`` PATCHes it with a merge patch, the HPA controller reads and writes it; both expect
``spec.replicas``, ``status.replicas`` and ``status.selector`` (the label selector as a string). A write
changes only ``spec.replicas`` of the parent (bumping its generation) and honours a ``resourceVersion``
precondition against the parent, as the apiserver's scale storage does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

from ... import errors, routing
from ...decoding import check_fields, decode_body, validation_mode, warning_headers
from ...patch import apply_patch
from ...resources import ResourceType
from ...responses import json_response
from ...store import Obj

if TYPE_CHECKING:
    from ...services import ClusterServices


def selector_string(obj: Obj) -> str:
    try:
        return str(label_selector_from_match((obj.get("spec") or {}).get("selector")))
    except SelectorError:
        return ""


def to_scale(obj: Obj) -> Obj:
    """The Scale view of a Deployment or ReplicaSet (zero values omitted as Go's omitempty does)."""
    meta = obj["metadata"]
    replicas = (obj.get("spec") or {}).get("replicas")
    status: Obj = {"replicas": int((obj.get("status") or {}).get("replicas") or 0)}
    selector = selector_string(obj)
    if selector:
        status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": replicas} if replicas else {},
        "status": status,
    }


def validate_scale(scale: Obj, name: str) -> int:
    """``ValidateScale``: the new replica count, or 422 ``Scale.autoscaling "x" is invalid``."""
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise errors.bad_request(
            f'Scale in version "v1" cannot be handled as a Scale: invalid replicas {replicas!r}'
        )
    if replicas < 0:
        raise errors.invalid(
            "Scale",
            "autoscaling",
            "scale",
            name,
            [
                (
                    "spec.replicas",
                    "FieldValueInvalid",
                    f"Invalid value: {replicas}: must be greater than or equal to 0",
                )
            ],
        )
    return replicas


def set_replicas(
    cluster: ClusterServices,
    rt: ResourceType,
    namespace: str,
    name: str,
    replicas: int,
    resource_version: str | None = None,
) -> Obj:
    """Write ``spec.replicas`` of the parent through admission (validation, generation bump)."""
    current = cluster.store.get(rt, namespace, name)
    if resource_version and resource_version != current["metadata"]["resourceVersion"]:
        raise errors.conflict(rt.group, rt.plural, name)
    if (current.get("spec") or {}).get("replicas") == replicas:
        return current
    updated = dict(current)
    updated["spec"] = {**(current.get("spec") or {}), "replicas": replicas}
    admitted = cluster.admit(rt, updated, current)
    return cluster.store.update(rt, admitted)


def register_scale(cluster: ClusterServices, rt: ResourceType) -> None:
    """Serve ``<plural>/{name}/scale`` for ``rt`` (GET, PUT, PATCH)."""

    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        namespace, name = target.namespace or "", target.name or ""
        current = cluster.store.get(rt, namespace, name)
        if request.method == "GET":
            return json_response(to_scale(current))
        if request.method not in ("PUT", "PATCH"):
            raise errors.method_not_allowed()
        raw = await request.read()
        content_type = request.headers.get("Content-Type", "application/json")
        duplicates: list[str] = []
        if request.method == "PUT":
            decoded = decode_body(raw, content_type)
            scale, duplicates = decoded.body, decoded.duplicates
            if not isinstance(scale, dict):
                raise errors.bad_request("the body of the request must be a JSON object")
            precondition = (scale.get("metadata") or {}).get("resourceVersion")
        else:
            scale = apply_patch(to_scale(current), raw, content_type, "Scale")
            precondition = (
                (scale.get("metadata") or {}).get("resourceVersion") if b'"resourceVersion"' in raw else None
            )
        mode = validation_mode(request.query.get("fieldValidation"), request.method)
        scale, warnings = check_fields(scale, "autoscaling/v1", "Scale", mode, duplicates)
        replicas = validate_scale(scale, name)
        if request.query.get("dryRun") == "All":
            return json_response({**to_scale(current), "spec": {"replicas": replicas} if replicas else {}})
        updated = set_replicas(cluster, rt, namespace, name, replicas, precondition)
        return json_response(to_scale(updated), headers=warning_headers(warnings))

    cluster.register_subresource(rt, "scale", handle)
