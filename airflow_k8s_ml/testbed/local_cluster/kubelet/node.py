"""The one Node object, built from the settings: what ``kubectl get nodes`` / ``describe node`` show.

Capacity equals allocatable (no system reservations on a laptop). ``nvidia.com/gpu`` is listed only when
the node has GPUs, as a device plugin would only advertise what exists.
"""

from __future__ import annotations

import platform
import uuid
from typing import Any

from ..meta import rfc3339
from ..settings import ClusterSettings
from .fit import EPHEMERAL_STORAGE, GPU

Obj = dict[str, Any]
KUBELET_VERSION = "v1.32.0"
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def node_labels(settings: ClusterSettings) -> dict[str, str]:
    arch = _ARCH.get(platform.machine().lower(), platform.machine().lower())
    system = platform.system().lower()
    return {
        "kubernetes.io/hostname": settings.node_name,
        "kubernetes.io/os": system,
        "kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": system,
        "beta.kubernetes.io/arch": arch,
    }


def node_capacity(settings: ClusterSettings) -> dict[str, str]:
    capacity = {
        "cpu": str(settings.capacity.cpu),
        "memory": str(settings.capacity.memory),
        "pods": str(settings.capacity.pods),
        "ephemeral-storage": EPHEMERAL_STORAGE,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if settings.capacity.gpus:
        capacity[GPU] = str(settings.capacity.gpus)
    return capacity


def _condition(type_: str, status: str, reason: str, message: str, now: float) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": rfc3339(now),
        "lastTransitionTime": rfc3339(now),
    }


def node_status(settings: ClusterSettings, now: float) -> Obj:
    labels = node_labels(settings)
    return {
        "capacity": node_capacity(settings),
        "allocatable": node_capacity(settings),
        "conditions": [
            _condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
                now,
            ),
            _condition(
                "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now
            ),
            _condition(
                "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now
            ),
            _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", now),
        ],
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": settings.node_name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": labels["kubernetes.io/arch"],
            "operatingSystem": labels["kubernetes.io/os"],
            "bootID": str(uuid.uuid4()),
            "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, platform.node()).hex,
            "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, platform.node())),
            "kernelVersion": platform.release(),
            "osImage": f"{platform.system()} (local processes)",
            "containerRuntimeVersion": "local://0.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
        },
    }


def node_object(settings: ClusterSettings, now: float) -> Obj:
    return {
        "metadata": {
            "name": settings.node_name,
            "labels": node_labels(settings),
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "127.42.0.0/16", "podCIDRs": ["127.42.0.0/16"]},
        "status": node_status(settings, now),
    }
