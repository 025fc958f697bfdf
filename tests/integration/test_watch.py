"""The shared watch against a real API server: fan-out, resume, 410 re-list, 429/500, refused watches.

Jobs are created suspended (no pods) and completed through /status, so these tests exercise the watch
only, in well under a second each. Each test has a cluster of its own (faults and /metrics are global).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from airflow_k8s_ml.kube.async_client import get_kube
from airflow_k8s_ml.kube.errors import ApiError
from airflow_k8s_ml.kube.requests import Request
from airflow_k8s_ml.kube.resources import Resource, resource_for
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchKey, WatchRegistry
from airflow_k8s_ml.status import classify
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import use_cluster

from .workload_helpers import complete, in_thread, job, metric

JOBS = WatchKey("kubernetes_default", resource_for(None, "Job"), "default")


@pytest.fixture()
def client(fresh_cluster: ClusterThread, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    use_cluster(monkeypatch, fresh_cluster.kubeconfig_path, namespace="default")
    client = KubeClient(namespace="default")
    yield client
    client.close()


async def until(predicate: Callable[[], Any], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def until_metric(client: KubeClient, name: str, value: float, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while (current := await in_thread(metric, client, name)) != value:
        assert asyncio.get_running_loop().time() < deadline, f"{name} is {current}, expected {value}"
        await asyncio.sleep(0.05)


async def create_suspended(client: KubeClient, *names: str) -> None:
    for name in names:
        await in_thread(client.create, job(name, "pass", suspend=True))


async def test_many_waiters_share_one_watch(client: KubeClient, registry: WatchRegistry) -> None:
    names = [f"share-{i}" for i in range(20)]
    await create_suspended(client, *names)
    wakes = {name: asyncio.Event() for name in names}
    async with contextlib.AsyncExitStack() as stack:
        subs = {n: await stack.enter_async_context(registry.subscribe(JOBS, n, wakes[n])) for n in names}
        await until(lambda: all(sub.synced and sub.get(name) for name, sub in subs.items()))
        await until_metric(client, "apiserver_registered_watchers", 1)
        for wake in wakes.values():
            wake.clear()
        await in_thread(complete, client, "share-3", "default")
        await asyncio.wait_for(wakes["share-3"].wait(), 5)
        assert classify(subs["share-3"].get("share-3") or {}).succeeded
        assert not any(wakes[n].is_set() for n in names if n != "share-3")
        assert registry.watches[JOBS].stats["lists"] == 1
    watch = registry.watches.get(JOBS)
    assert watch is None  # the last waiter left: the watch stopped (its connection is closed)


async def test_deleted_object_leaves_its_last_state(client: KubeClient, registry: WatchRegistry) -> None:
    await create_suspended(client, "gone")
    wake = asyncio.Event()
    async with registry.subscribe(JOBS, "gone", wake) as sub:
        await until(lambda: sub.get("gone") is not None)
        await in_thread(complete, client, "gone", "default")
        await in_thread(client.delete, "batch/v1", "Job", "gone", "default", propagation="Background")
        await until(lambda: sub.get("gone") is None)
        assert classify(sub.tombstones["gone"]).succeeded


async def test_resumes_from_last_resource_version_when_watches_close(
    client: KubeClient, fresh_cluster: ClusterThread, registry: WatchRegistry
) -> None:
    await create_suspended(client, "resume")
    fresh_cluster.cluster.faults.configure({"close_watches_after": 0.2})
    wake = asyncio.Event()
    async with registry.subscribe(JOBS, "resume", wake) as sub:
        await until(lambda: registry.watches[JOBS].stats["watches"] >= 4)
        await in_thread(complete, client, "resume", "default")
        await until(lambda: classify(sub.get("resume") or {}).succeeded)
        stats = registry.watches[JOBS].stats
        assert stats["lists"] == 1 and stats["expired"] == 0  # resumed every time, never re-listed


async def test_relists_on_410_expired(
    client: KubeClient, fresh_cluster: ClusterThread, registry: WatchRegistry
) -> None:
    await create_suspended(client, "expired")
    wake = asyncio.Event()
    async with registry.subscribe(JOBS, "expired", wake) as sub:
        await until(lambda: sub.synced)
        fresh_cluster.cluster.faults.configure({"close_watches_after": 0.2, "expire_resumes": True})
        fresh_cluster.call(fresh_cluster.cluster.store.close_all_watches)  # end the watch opened before
        await until(lambda: registry.watches[JOBS].stats["expired"] >= 2)
        await in_thread(complete, client, "expired", "default")
        await until(lambda: classify(sub.get("expired") or {}).succeeded)
        assert registry.watches[JOBS].stats["lists"] >= 2


async def test_429_and_500_do_not_break_the_wait(
    client: KubeClient, fresh_cluster: ClusterThread, registry: WatchRegistry
) -> None:
    await create_suspended(client, "faulty")
    fresh_cluster.cluster.faults.configure(
        {
            "rules": [
                {"verbs": "LIST", "resources": "jobs", "code": 429, "retry_after": 0, "limit": 2},
                {"verbs": "WATCH", "resources": "jobs", "code": 500, "limit": 3},
                {"verbs": "WATCH", "resources": "jobs", "code": 429, "retry_after": 0, "limit": 2},
            ]
        }
    )
    wake = asyncio.Event()
    async with registry.subscribe(JOBS, "faulty", wake) as sub:
        await until(lambda: sub.synced)
        await until(lambda: registry.watches[JOBS].stats["watches"] >= 1)
        await in_thread(complete, client, "faulty", "default")
        await until(lambda: classify(sub.get("faulty") or {}).succeeded)
        assert registry.watches[JOBS].stats["errors"] >= 5  # every injected WATCH failure was retried
    assert await in_thread(metric, client, "apiserver_request_total", verb="WATCH", code="500") == 3


class WatchForbidden:
    """The API as a user allowed to list but not to watch sees it (RBAC without the ``watch`` verb)."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube

    async def run(self, plan: Any) -> Any:
        return await self.kube.run(plan)

    async def stream(self, request: Request) -> Any:
        if ("watch", "true") in request.query:
            raise ApiError(
                403, "Forbidden", 'jobs.batch is forbidden: User "ci" cannot watch resource "jobs"'
            )
        return await self.kube.stream(request)


async def test_falls_back_to_polling_when_watch_is_refused(
    client: KubeClient, registry: WatchRegistry
) -> None:
    await create_suspended(client, "polled")
    kube = WatchForbidden(await get_kube())
    wake = asyncio.Event()
    async with registry.subscribe(JOBS, "polled", wake, kube=kube, poll_interval=0.2) as sub:
        await until(lambda: sub.synced)
        await in_thread(complete, client, "polled", "default")
        await until(lambda: classify(sub.get("polled") or {}).succeeded, timeout=3)
        assert sub.mode == "poll" and sub.error is None


async def test_a_resource_the_server_does_not_serve_fails_the_subscribers(
    client: KubeClient, registry: WatchRegistry
) -> None:
    key = WatchKey("kubernetes_default", Resource("example.com", "v1", "widgets", "Widget"), "default")
    wake = asyncio.Event()
    async with registry.subscribe(key, "w", wake) as sub:
        await asyncio.wait_for(wake.wait(), 5)
        assert sub.error is not None and sub.error.status == 404
