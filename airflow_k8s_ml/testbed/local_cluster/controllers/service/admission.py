"""Service admission: ``SetDefaults_Service``, ClusterIP / NodePort allocation, and validation.

ClusterIPs come from 10.96.0.0/12 like a kubeadm cluster's, so ``kubectl get svc`` looks familiar, but they
are display-only: nothing routes them on this machine (no kube-proxy, no cluster DNS). Clients reach pods
through the pod IPs in the Endpoints or through the API server's service proxy. Headless services
(``clusterIP: None``) get no address, as upstream.
"""

from __future__ import annotations

import copy
import ipaddress
import random
from collections.abc import Callable, Iterable
from typing import Any

from ... import errors

Obj = dict[str, Any]
Cause = tuple[str, str, str]

SERVICE_CIDR = ipaddress.IPv4Network("10.96.0.0/12")
NODE_PORTS = range(30000, 32768)
_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
_ALLOCATED_FIELDS = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")


def _reserved(ip: ipaddress.IPv4Address) -> bool:
    return ip in (
        SERVICE_CIDR.network_address,
        SERVICE_CIDR.broadcast_address,
        SERVICE_CIDR.network_address + 1,
    )


class Allocator:
    """Random free addresses and node ports (upstream allocates randomly too); ``used`` is read from the
    store each time, so a deleted Service frees its address without bookkeeping."""

    def __init__(
        self,
        used_ips: Callable[[], set[str]],
        used_ports: Callable[[], set[int]],
        rng: random.Random | None = None,
    ) -> None:
        self._used_ips = used_ips
        self._used_ports = used_ports
        self._rng = rng or random.Random()

    def cluster_ip(self, requested: str | None = None) -> str:
        used = self._used_ips()
        if requested:
            try:
                ip = ipaddress.IPv4Address(requested)
            except ValueError as exc:
                raise _invalid_ip(requested, "must be a valid IP address") from exc
            if ip not in SERVICE_CIDR or _reserved(ip):
                raise _invalid_ip(
                    requested,
                    f"failed to allocate IP {requested}: the provided IP ({requested}) is not "
                    f"in the valid range. The range of valid IPs is {SERVICE_CIDR}",
                )
            if requested in used:
                raise _invalid_ip(
                    requested, f"failed to allocate IP {requested}: provided IP is already allocated"
                )
            return requested
        for _ in range(10_000):
            ip = SERVICE_CIDR.network_address + self._rng.randrange(2, SERVICE_CIDR.num_addresses - 1)
            if str(ip) not in used:
                return str(ip)
        raise errors.internal_error("failed to allocate a serviceIP: range is full")

    def node_port(self, taken: set[int]) -> int:
        used = self._used_ports() | taken
        free = [p for p in NODE_PORTS if p not in used]
        if not free:
            raise errors.internal_error("failed to allocate a nodePort: range is full")
        return self._rng.choice(free)


def _invalid_ip(ip: str, detail: str) -> errors.StatusError:
    return errors.invalid(
        "Service",
        "",
        "services",
        "",
        [("spec.clusterIPs", "FieldValueInvalid", f'Invalid value: []string{{"{ip}"}}: {detail}')],
    )


# -- defaults ------------------------------------------------------------------------------------------
def set_defaults(service: Obj) -> None:
    spec = service.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["sessionAffinity"] == "ClientIP":
        config = spec.setdefault("sessionAffinityConfig", {}).setdefault("clientIP", {})
        config.setdefault("timeoutSeconds", 10800)
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if spec["type"] == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")


def carry_over_allocations(service: Obj, old: Obj) -> None:
    """``patchAllocatedValues``: a PUT that omits the allocated address and node ports keeps them."""
    spec, old_spec = service.setdefault("spec", {}), old.get("spec") or {}
    if spec.get("type") == "ExternalName" or old_spec.get("type") == "ExternalName":
        return
    for name in _ALLOCATED_FIELDS:
        if not spec.get(name) and old_spec.get(name):
            spec[name] = copy.deepcopy(old_spec[name])
    old_ports = {
        (p.get("port"), p.get("protocol", "TCP")): p.get("nodePort") for p in old_spec.get("ports") or []
    }
    for port in spec.get("ports") or []:
        if not port.get("nodePort") and old_ports.get((port.get("port"), port.get("protocol", "TCP"))):
            port["nodePort"] = old_ports[(port.get("port"), port.get("protocol", "TCP"))]


def allocate(service: Obj, allocator: Allocator) -> None:
    """Give a non-headless ClusterIP/NodePort/LoadBalancer Service its address (and node ports)."""
    spec = service["spec"]
    if spec["type"] == "ExternalName":
        for name in _ALLOCATED_FIELDS:
            spec.pop(name, None)
        return
    requested = spec.get("clusterIP") or (spec.get("clusterIPs") or [None])[0]
    if requested == "None":
        spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
    elif not (
        spec.get("clusterIPs") and spec.get("clusterIP") == spec["clusterIPs"][0] and spec.get("ipFamilies")
    ):
        ip = allocator.cluster_ip(requested)
        spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        taken = {int(p["nodePort"]) for p in spec.get("ports") or [] if p.get("nodePort")}
        for port in spec.get("ports") or []:
            if not port.get("nodePort"):
                port["nodePort"] = allocator.node_port(taken)
                taken.add(port["nodePort"])


# -- validation ----------------------------------------------------------------------------------------
def validate(service: Obj) -> list[Cause]:
    spec = service.get("spec") or {}
    causes: list[Cause] = []
    kind = spec.get("type")
    if kind not in _TYPES:
        causes.append(
            (
                "spec.type",
                "FieldValueNotSupported",
                f'Unsupported value: "{kind}": supported values: ' + ", ".join(f'"{t}"' for t in _TYPES),
            )
        )
    headless = spec.get("clusterIP") == "None"
    ports = spec.get("ports") or []
    if kind == "ExternalName":
        if not spec.get("externalName"):
            causes.append(("spec.externalName", "FieldValueRequired", "Required value"))
    elif not ports and not headless:
        causes.append(("spec.ports", "FieldValueRequired", "Required value"))
    causes.extend(_port_causes(ports))
    return causes


def _port_causes(ports: Iterable[Obj]) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    ports = list(ports)
    for i, port in enumerate(ports):
        path = f"spec.ports[{i}]"
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append((f"{path}.name", "FieldValueRequired", "Required value"))
        elif name in names:
            causes.append((f"{path}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
        names.add(name)
        number = port.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            causes.append(
                (
                    f"{path}.port",
                    "FieldValueInvalid",
                    f"Invalid value: {number}: must be between 1 and 65535, inclusive",
                )
            )
        protocol = port.get("protocol")
        if protocol not in ("TCP", "UDP", "SCTP"):
            causes.append(
                (
                    f"{path}.protocol",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{protocol}": supported values: "SCTP", "TCP", "UDP"',
                )
            )
    return causes


def validate_update(service: Obj, old: Obj) -> list[Cause]:
    spec, old_spec = service.get("spec") or {}, old.get("spec") or {}
    if "ExternalName" in (spec.get("type"), old_spec.get("type")):
        return []
    if old_spec.get("clusterIP") and spec.get("clusterIP") != old_spec.get("clusterIP"):
        return [
            (
                "spec.clusterIPs[0]",
                "FieldValueInvalid",
                f'Invalid value: []string{{"{spec.get("clusterIP")}"}}: may not change once set',
            )
        ]
    return []


def admit_service(allocator: Allocator) -> Callable[[Obj, Obj | None], Obj]:
    """The admission hook: defaults, validation, then allocation (a rejected Service allocates nothing)."""

    def admit(obj: Obj, old: Obj | None) -> Obj:
        service = copy.deepcopy(obj)
        set_defaults(service)
        if old is not None:
            carry_over_allocations(service, old)
        causes = validate(service) + (validate_update(service, old) if old is not None else [])
        name = (service.get("metadata") or {}).get("name", "")
        if causes:
            raise errors.invalid("Service", "", "services", name, causes)
        try:
            allocate(service, allocator)
        except errors.StatusError as exc:
            if exc.code == 422 and exc.details is not None:
                exc.details["name"] = name
                exc.message = exc.message.replace('Service ""', f'Service "{name}"')
            raise
        if old is None:  # PrepareForCreate resets status; Go serializes the empty struct as loadBalancer: {}
            service["status"] = {"loadBalancer": {}}
        return service

    return admit
