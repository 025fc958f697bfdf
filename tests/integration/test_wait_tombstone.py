"""A Job deleted right after it succeeded reads as succeeded on both paths of the one wait decision
(``status.decide``): the trigger (its watch saw the deletion) and the worker's sync wait, used by the
non-deferrable operators and the sensor (it replays the changes since its last look). Deleted while still
running, it is an error on both."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchRegistry
from airflow_k8s_ml.operators.record import WorkloadRecord
from airflow_k8s_ml.operators.wait_settings import WaitSettings
from airflow_k8s_ml.triggers.sync_wait import WorkloadLooker
from tests.cluster_fixtures import wait_for

from .workload_helpers import complete, in_thread, job, run_trigger, trigger_for

DONE = "succeeded (CompletionsReached): Reached expected number of succeeded pods"


def delete(client: KubeClient, name: str, namespace: str) -> None:
    assert client.delete("batch/v1", "Job", name, namespace, propagation="Background")
    wait_for(lambda: client.get("batch/v1", "Job", name, namespace) is None)


def looker_for(client: KubeClient, obj: dict[str, Any]) -> WorkloadLooker:
    meta = obj["metadata"]
    record = WorkloadRecord("Job", "batch/v1", meta["name"], meta["namespace"], meta["uid"], 1, time.time())
    return WorkloadLooker(client, record, WaitSettings("kubernetes_default"))


def test_sync_wait_reads_a_job_deleted_right_after_it_succeeded_as_succeeded(
    client: KubeClient, namespace: str
) -> None:
    obj = client.create(job("ttl-zero", "pass", suspend=True))
    looker = looker_for(client, obj)
    assert looker.look() is None  # suspended: waiting for admission
    complete(client, "ttl-zero", namespace)  # succeeded, then deleted before the next look (a TTL of 0)
    delete(client, "ttl-zero", namespace)
    event = looker.look()
    assert event is not None and event.outcome == "succeeded", event
    assert event.message == f"Job {namespace}/ttl-zero {DONE} (then deleted)"
    assert event.uid == obj["metadata"]["uid"]


def test_sync_wait_reads_a_job_deleted_while_running_as_an_error(client: KubeClient, namespace: str) -> None:
    obj = client.create(job("yanked", "pass", suspend=True))
    looker = looker_for(client, obj)
    assert looker.look() is None
    delete(client, "yanked", namespace)
    event = looker.look()
    assert event is not None and event.outcome == "error"
    assert event.message == f"Job {namespace}/yanked was deleted while waiting"


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    limit = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < limit, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_trigger_reads_a_job_deleted_right_after_it_succeeded_as_succeeded(
    client: KubeClient, registry: WatchRegistry, namespace: str
) -> None:
    obj = await in_thread(client.create, job("ttl-zero", "pass", suspend=True))
    waiting = asyncio.create_task(run_trigger(trigger_for(obj)))
    # The trigger watches the Job and its pods: both listed, so the completion and deletion are seen.
    await until(lambda: len(registry.watches) == 2 and all(w.synced for w in registry.watches.values()))
    await in_thread(complete, client, "ttl-zero", namespace)
    await in_thread(delete, client, "ttl-zero", namespace)
    event = await waiting
    assert event.outcome == "succeeded", event.message
    assert event.message.startswith(f"Job {namespace}/ttl-zero {DONE}")
