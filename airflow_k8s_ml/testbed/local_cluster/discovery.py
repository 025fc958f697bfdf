"""Stateless discovery documents: /version, /api, /apis, resource lists and the minimal OpenAPI v3.

Everything is derived from :mod:`resources`, so what discovery announces is exactly what is served;
``unserved`` names the (group, version) pairs this cluster's settings turn off (Kueue v1beta2 for a Kueue
< 0.16 cluster).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .resources import RESOURCE_TYPES, ResourceType, Unserved, group_versions, served_at

KUBERNETES_VERSION = {"major": "1", "minor": "32"}


def version_info() -> dict[str, str]:
    return {
        **KUBERNETES_VERSION,
        "gitVersion": "v1.32.0-airflow-k8s-ml",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def group_list(unserved: Unserved = frozenset()) -> dict[str, Any]:
    groups = []
    for group, versions in group_versions(unserved).items():
        version_entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        preferred = versions[0]  # group_versions puts the preferred one first
        # The DynamicClient compares preferredVersion with versions[] entries as dicts: keep them identical.
        preferred_entry = next(e for e in version_entries if e["version"] == preferred)
        groups.append({"name": group, "versions": version_entries, "preferredVersion": dict(preferred_entry)})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str, unserved: Unserved = frozenset()) -> dict[str, Any] | None:
    for entry in group_list(unserved)["groups"]:
        if entry["name"] == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **entry}
    return None


def resource_list(group: str, version: str, unserved: Unserved = frozenset()) -> dict[str, Any] | None:
    types = served_at(group, version)
    if not types or (group, version) in unserved:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        if rt.kind != "MetricValueList":  # custom metrics: only ``pods/<metric>`` rows, as the adapter
            resources.append(_resource_entry(rt))
        for sub in rt.subresources:
            resources.append(_subresource_entry(rt, sub))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(_verbs(rt)),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    entry["storageVersionHash"] = hashlib.sha256(rt.qualified.encode()).hexdigest()[:11]
    return entry


def _verbs(rt: ResourceType) -> tuple[str, ...]:
    if rt.virtual:
        return rt.verbs
    if rt.plural == "namespaces":
        return ("create", "delete", "get", "list", "patch", "update", "watch")
    return ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


def _subresource_entry(rt: ResourceType, sub: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": f"{rt.plural}/{sub}",
        "singularName": "",
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": ["get", "patch", "update"],
    }
    if sub == "log":
        entry.update(kind="Pod", verbs=["get"])
    elif sub == "scale":
        entry.update(group="autoscaling", version="v1", kind="Scale")
    elif sub == "eviction":
        entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
    elif sub == "pendingworkloads" or rt.kind == "MetricValueList":
        entry.update(verbs=["get"])
    elif sub == "proxy":
        entry.update(kind="ServiceProxyOptions", verbs=["create", "delete", "get", "patch", "update"])
    return entry


# -- OpenAPI v3 -----------------------------------------------------------------------------------------
def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _all_group_versions(unserved: Unserved) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for rt in RESOURCE_TYPES:
        if (rt.group, rt.version) not in seen and (rt.group, rt.version) not in unserved:
            seen.append((rt.group, rt.version))
    return seen


def openapi_document(group: str, version: str, unserved: Unserved = frozenset()) -> dict[str, Any] | None:
    """A group-version document with what kubectl looks for: per kind, a PATCH operation on the item path
    with ``x-kubernetes-group-version-kind`` and a ``fieldValidation`` parameter (so it sends Strict)."""
    types = served_at(group, version)
    if not types or (group, version) in unserved:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for rt in (t for t in types if not t.virtual):
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = f"/{_gv_path(group, version)}"
        item = (
            f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
            if rt.namespaced
            else f"{base}/{rt.plural}/{{name}}"
        )
        collection = item.rsplit("/", 1)[0]
        params = [
            {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ]
        ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
        op = {
            "x-kubernetes-group-version-kind": gvk,
            "parameters": params,
            "responses": {"200": {"content": {"application/json": {"schema": ref}}}},
        }
        paths[item] = {
            "get": {**op, "operationId": f"read{rt.kind}", "x-kubernetes-action": "get"},
            "put": {**op, "operationId": f"replace{rt.kind}", "x-kubernetes-action": "put"},
            "patch": {**op, "operationId": f"patch{rt.kind}", "x-kubernetes-action": "patch"},
            "delete": {**op, "operationId": f"delete{rt.kind}", "x-kubernetes-action": "delete"},
        }
        paths[collection] = {"post": {**op, "operationId": f"create{rt.kind}", "x-kubernetes-action": "post"}}
        schemas[_schema_name(rt)] = {
            "type": "object",
            "x-kubernetes-group-version-kind": [gvk],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object"},
                "status": {"type": "object"},
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (airflow-k8s-ml local cluster)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _schema_name(rt: ResourceType) -> str:
    prefix = ".".join(reversed(rt.group.split("."))) if rt.group else "core"
    return f"io.k8s.api.{prefix}.{rt.version}.{rt.kind}"


def openapi_index(unserved: Unserved = frozenset()) -> dict[str, Any]:
    paths = {}
    for group, version in _all_group_versions(unserved):
        doc = openapi_document(group, version)
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
        gv = _gv_path(group, version)
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}
