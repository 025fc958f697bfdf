"""The Endpoints of a Service (pkg/controller/endpoint), pure.

Every pod the selector matches that has an IP and is not finished (nor terminating, unless
``publishNotReadyAddresses``) contributes one address per Service port whose ``targetPort`` it resolves:
a number as is, a name through the pod's container ports. Ready pods go to ``addresses``, others to
``notReadyAddresses``; addresses with the same resolved ports share a subset (``RepackSubsets``).
"""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.k8s.selectors import label_selector_from_set

Obj = dict[str, Any]

HEADLESS_LABEL = "service.kubernetes.io/headless"


def find_port(pod: Obj, service_port: Obj) -> int | None:
    """``podutil.FindPort``: the container port a Service port's targetPort names on this pod."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol", "TCP")
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def _is_ready(pod: Obj) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def should_include(pod: Obj, include_terminating: bool) -> bool:
    """``ShouldPodBeInEndpoints``."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if not status.get("podIP"):
        return False
    return include_terminating or not (pod.get("metadata") or {}).get("deletionTimestamp")


def _address(pod: Obj, service_name: str) -> Obj:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    address: Obj = {"ip": pod["status"]["podIP"]}
    if spec.get("hostname") and spec.get("subdomain") == service_name:
        address["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        address["nodeName"] = spec["nodeName"]
    address["targetRef"] = {
        "kind": "Pod",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid"),
    }
    return address


def _endpoint_port(service_port: Obj, number: int) -> Obj:
    port: Obj = {"port": number, "protocol": service_port.get("protocol", "TCP")}
    if service_port.get("name"):
        port["name"] = service_port["name"]
    if service_port.get("appProtocol"):
        port["appProtocol"] = service_port["appProtocol"]
    return port


def subsets_for(service: Obj, pods: list[Obj]) -> list[Obj]:
    """Repacked subsets: one per distinct set of resolved ports, addresses sorted by IP then uid."""
    spec = service.get("spec") or {}
    name = service["metadata"]["name"]
    publish = bool(spec.get("publishNotReadyAddresses"))
    headless = spec.get("clusterIP") == "None"
    groups: dict[str, tuple[list[Obj], list[Obj], list[Obj]]] = {}
    for pod in pods:
        if not should_include(pod, publish):
            continue
        ports = [
            _endpoint_port(p, n) for p in spec.get("ports") or [] if (n := find_port(pod, p)) is not None
        ]
        if not ports and not (headless and not spec.get("ports")):
            continue
        ports.sort(key=lambda p: (p.get("name", ""), p["port"], p["protocol"]))
        key = repr(ports)
        ready, not_ready, _ = groups.setdefault(key, ([], [], ports))
        (ready if publish or _is_ready(pod) else not_ready).append(_address(pod, name))
    subsets = []
    for ready, not_ready, ports in groups.values():
        subset: Obj = {}
        if ready:
            subset["addresses"] = sorted(ready, key=_address_key)
        if not_ready:
            subset["notReadyAddresses"] = sorted(not_ready, key=_address_key)
        if ports:
            subset["ports"] = ports
        subsets.append(subset)
    return sorted(subsets, key=repr)


def _address_key(address: Obj) -> tuple[str, str]:
    return (address["ip"], (address.get("targetRef") or {}).get("uid", ""))


def endpoints_for(service: Obj, pods: list[Obj]) -> Obj:
    """The Endpoints object the controller wants for ``service`` (labels copied, headless marked)."""
    meta = service["metadata"]
    selector = label_selector_from_set((service.get("spec") or {}).get("selector"))
    selected = [p for p in pods if selector.matches((p.get("metadata") or {}).get("labels") or {})]
    labels = dict(meta.get("labels") or {})
    if (service.get("spec") or {}).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    endpoints: Obj = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
    }
    if labels:
        endpoints["metadata"]["labels"] = labels
    subsets = subsets_for(service, selected)
    if subsets:
        endpoints["subsets"] = subsets
    return endpoints
