"""The embedded local cluster: a loopback Kubernetes API server that runs each pod's command as a process.

Knows nothing of Airflow. See docs/local-cluster.md for what it implements and how it differs from a real
cluster. Typical use in tests::

    with ClusterThread(ClusterSettings(state_dir=tmp)) as c:
        kubernetes.config.load_kube_config(str(c.kubeconfig_path))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import ClusterThread, LocalCluster
    from .settings import ClusterSettings, FakeClock, ImageRule, NodeCapacity

__all__ = ["ClusterSettings", "ClusterThread", "FakeClock", "ImageRule", "LocalCluster", "NodeCapacity"]


def __getattr__(name: str) -> Any:
    if name in ("ClusterThread", "LocalCluster"):
        from . import cluster

        return getattr(cluster, name)
    if name in ("ClusterSettings", "FakeClock", "ImageRule", "NodeCapacity"):
        from . import settings

        return getattr(settings, name)
    raise AttributeError(name)
