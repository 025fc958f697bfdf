"""Fixtures shared by the watch and trigger tests (the cluster ones are in tests/cluster_fixtures.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from airflow_k8s_ml.kube.async_client import close_all
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchRegistry, reset_registry
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import use_cluster

from .workload_helpers import FAST_WATCH


@pytest.fixture()
async def registry() -> AsyncIterator[WatchRegistry]:
    """A fresh process-wide watch registry with test timings; closed, with every async client, afterwards."""
    registry = reset_registry(FAST_WATCH)
    yield registry
    await registry.close()
    await close_all()


@pytest.fixture()
def client(cluster: ClusterThread, namespace: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    """A sync client on the shared cluster, in the test's namespace (``kubernetes_default`` points there
    too). Modules that need a fresh cluster or other retries define their own."""
    use_cluster(monkeypatch, cluster.kubeconfig_path, namespace="default")
    client = KubeClient(namespace=namespace)
    yield client
    client.close()
