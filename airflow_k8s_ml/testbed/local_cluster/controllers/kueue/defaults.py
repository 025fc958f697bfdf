"""The queue `local up --gpu-quota N` creates: upstream's single-ClusterQueue sample (``default-flavor``,
``cluster-queue`` for every namespace, ``user-queue`` in ``default``), with the node's cpu and memory and
N ``nvidia.com/gpu`` as nominal quota."""

from __future__ import annotations

from typing import Any

from ...settings import QueueQuota
from .api import API_VERSION

Obj = dict[str, Any]

DEFAULT_FLAVOR = "default-flavor"
DEFAULT_CLUSTER_QUEUE = "cluster-queue"
DEFAULT_LOCAL_QUEUE = "user-queue"
GPU = "nvidia.com/gpu"


def default_objects(quota: QueueQuota) -> list[tuple[str, Obj]]:
    """(plural, object) in creation order."""
    resources = [
        {"name": "cpu", "nominalQuota": quota.cpu},
        {"name": "memory", "nominalQuota": quota.memory},
        {"name": GPU, "nominalQuota": str(quota.gpus)},
    ]
    return [
        (
            "resourceflavors",
            {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": DEFAULT_FLAVOR}},
        ),
        (
            "clusterqueues",
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": DEFAULT_CLUSTER_QUEUE},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": [r["name"] for r in resources],
                            "flavors": [{"name": DEFAULT_FLAVOR, "resources": resources}],
                        }
                    ],
                },
            },
        ),
        (
            "localqueues",
            {
                "apiVersion": API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": DEFAULT_LOCAL_QUEUE, "namespace": quota.namespace},
                "spec": {"clusterQueue": DEFAULT_CLUSTER_QUEUE},
            },
        ),
    ]
