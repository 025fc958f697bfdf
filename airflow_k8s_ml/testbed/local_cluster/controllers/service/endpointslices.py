"""The EndpointSlices of a Service (pkg/controller/endpointslice), pure.

kubectl (1.32: ``describe service``) and newer clients read discovery.k8s.io/v1 EndpointSlices instead of
v1 Endpoints, so the local cluster maintains both from the same pods. One slice per distinct set of
resolved ports (``<service>-<random>``, labels ``kubernetes.io/service-name`` and
``endpointslice.kubernetes.io/managed-by``, a controller ownerReference to the Service so the garbage
collector removes them with it). Terminating pods stay listed with ``terminating: true`` as upstream.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_k8s_ml.k8s.selectors import label_selector_from_set

from ...meta import owner_reference
from .endpoints import HEADLESS_LABEL, find_port

Obj = dict[str, Any]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
MAX_ENDPOINTS = 100  # --max-endpoints-per-slice


def _is_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _endpoint(pod: Obj, service: Obj) -> Obj:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    terminating = bool(meta.get("deletionTimestamp"))
    serving = _is_ready(pod) or bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    endpoint: Obj = {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {"ready": serving and not terminating, "serving": serving, "terminating": terminating},
    }
    if spec.get("hostname") and spec.get("subdomain") == service["metadata"]["name"]:
        endpoint["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        endpoint["nodeName"] = spec["nodeName"]
    endpoint["targetRef"] = {
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid"),
    }
    return endpoint


def _ports(pod: Obj, service: Obj) -> list[Obj]:
    ports = []
    for service_port in (service.get("spec") or {}).get("ports") or []:
        number = find_port(pod, service_port)
        if number is None:
            continue
        port: Obj = {
            "name": service_port.get("name") or "",
            "port": number,
            "protocol": service_port.get("protocol", "TCP"),
        }
        if service_port.get("appProtocol"):
            port["appProtocol"] = service_port["appProtocol"]
        ports.append(port)
    return sorted(ports, key=lambda p: (p["name"], p["port"]))


def _included(pod: Obj) -> bool:
    """``ShouldPodBeInEndpoints(pod, includeTerminating=true)``."""
    status = pod.get("status") or {}
    return status.get("phase") not in ("Succeeded", "Failed") and bool(status.get("podIP"))


def desired_groups(service: Obj, pods: list[Obj]) -> list[tuple[list[Obj], list[Obj]]]:
    """(ports, endpoints) per slice the Service should have; a placeholder when nothing matches."""
    selector = label_selector_from_set((service.get("spec") or {}).get("selector"))
    groups: dict[str, tuple[list[Obj], list[Obj]]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        if not _included(pod) or not selector.matches(pod["metadata"].get("labels") or {}):
            continue
        ports = _ports(pod, service)
        if not ports and (service.get("spec") or {}).get("ports"):
            continue
        groups.setdefault(repr(ports), (ports, []))[1].append(_endpoint(pod, service))
    result = []
    for ports, endpoints in groups.values():
        for start in range(0, len(endpoints), MAX_ENDPOINTS):
            result.append((ports, endpoints[start : start + MAX_ENDPOINTS]))
    return result or [([], [])]


def slice_labels(service: Obj) -> dict[str, str]:
    labels = dict(service["metadata"].get("labels") or {})
    labels.update({SERVICE_NAME_LABEL: service["metadata"]["name"], MANAGED_BY_LABEL: MANAGED_BY})
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    return labels


def new_slice(service: Obj, ports: list[Obj], endpoints: list[Obj]) -> Obj:
    meta = service["metadata"]
    body: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "generateName": f"{meta['name'][:57]}-",
            "namespace": meta["namespace"],
            "labels": slice_labels(service),
            "ownerReferences": [owner_reference(service)],
        },
        "addressType": "IPv4",
        "endpoints": copy.deepcopy(endpoints),
    }
    if ports:
        body["ports"] = copy.deepcopy(ports)
    return body


def plan(
    service: Obj, pods: list[Obj], existing: list[Obj]
) -> tuple[list[Obj], list[tuple[Obj, Obj]], list[Obj]]:
    """(slices to create, (slice, wanted body) to update, slices to delete): existing slices are reused
    when their ports match, as the reconciler does, so names stay stable while pods come and go."""
    remaining = sorted(existing, key=lambda s: s["metadata"]["name"])
    creates: list[Obj] = []
    updates: list[tuple[Obj, Obj]] = []
    for ports, endpoints in desired_groups(service, pods):
        match = next((s for s in remaining if (s.get("ports") or []) == ports), None)
        wanted = new_slice(service, ports, endpoints)
        if match is None:
            creates.append(wanted)
            continue
        remaining.remove(match)
        if (match.get("endpoints") or []) != endpoints or match["metadata"].get("labels") != wanted[
            "metadata"
        ]["labels"]:
            updates.append((match, wanted))
    return creates, updates, remaining
