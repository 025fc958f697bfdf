"""Kueue objects for integration tests: a flavor, a ClusterQueue with a GPU quota and a LocalQueue, and
readers of a job's Workload. Shared by the cluster tests and the operators' queued-workload tests."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU = "nvidia.com/gpu"
Obj = dict[str, Any]


def make_queues(
    custom: client.CustomObjectsApi,
    namespace: str,
    gpus: int,
    *,
    flavor: str = "default-flavor",
    strategy: str = "BestEffortFIFO",
    preemption: str = "Never",
    version: str = VERSION,
) -> tuple[str, str]:
    """A ClusterQueue of ``gpus`` nvidia.com/gpu (plus ample cpu and memory) for every namespace, and a
    LocalQueue ``user-queue`` in ``namespace``; returns (cluster queue, local queue) names."""
    if not _exists(custom, "resourceflavors", flavor, version):
        custom.create_cluster_custom_object(
            GROUP,
            version,
            "resourceflavors",
            {"apiVersion": f"{GROUP}/{version}", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        )
    cq = f"cq-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": cq},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "8"},
                                {"name": "memory", "nominalQuota": "32Gi"},
                                {"name": GPU, "nominalQuota": gpus},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    custom.create_cluster_custom_object(GROUP, version, "clusterqueues", body)
    lq = {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "LocalQueue",
        "metadata": {"name": "user-queue"},
        "spec": {"clusterQueue": cq},
    }
    custom.create_namespaced_custom_object(GROUP, version, namespace, "localqueues", lq)
    return cq, "user-queue"


def set_gpu_quota(custom: client.CustomObjectsApi, cq: str, gpus: int, version: str = VERSION) -> None:
    current = custom.get_cluster_custom_object(GROUP, version, "clusterqueues", cq)
    for resource in current["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if resource["name"] == GPU:
            resource["nominalQuota"] = gpus
    custom.replace_cluster_custom_object(GROUP, version, "clusterqueues", cq, current)


def _exists(custom: client.CustomObjectsApi, plural: str, name: str, version: str = VERSION) -> bool:
    try:
        custom.get_cluster_custom_object(GROUP, version, plural, name)
        return True
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise


def workload_of(
    custom: client.CustomObjectsApi, namespace: str, kind: str, name: str, version: str = VERSION
) -> Obj:
    """The Workload whose controller is the ``kind`` object ``name`` (empty until it exists)."""
    items = custom.list_namespaced_custom_object(GROUP, version, namespace, "workloads")["items"]
    for wl in items:
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == kind and ref.get("name") == name:
                return wl  # type: ignore[no-any-return]
    return {}


def condition(wl: Obj, type_: str) -> Obj:
    """The condition ``type_`` of a Workload (empty when absent)."""
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


def make_priority_classes(custom: client.CustomObjectsApi, **values: int) -> None:
    """WorkloadPriorityClasses by name and value (cluster-scoped: callers make the names unique)."""
    for name, value in values.items():
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        custom.create_cluster_custom_object(GROUP, VERSION, "workloadpriorityclasses", body)
