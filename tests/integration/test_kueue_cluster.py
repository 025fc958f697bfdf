"""Kueue on the local cluster, through the kubernetes client: queued Jobs and PyTorchJobs wait for quota
with upstream's Workload conditions, are admitted whole, release quota when they finish, and a
higher-priority workload preempts a lower one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.local_cluster.settings import NodeCapacity

from ..cluster_fixtures import fast_settings, python_cmd, wait_for
from .kueue_helpers import (
    GPU,
    GROUP,
    QUEUE_LABEL,
    VERSION,
    condition,
    make_queues,
    set_gpu_quota,
    workload_of,
)

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    """A cluster of its own whose node advertises 4 fake GPUs (more than any queue here allows)."""
    settings = fast_settings(tmp_path_factory.mktemp("kueue"), capacity=NodeCapacity(gpus=4))
    with ClusterThread(settings) as running:
        yield running


@pytest.fixture()
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


def _wait_file(path: Path) -> list[str]:
    return python_cmd(f"import os,time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.05)")


def gpu_job(name: str, queue: str, command: list[str], labels: dict[str, str] | None = None) -> Obj:
    container = {
        "name": "main",
        "image": "python:3.11",
        "command": command,
        "resources": {"limits": {GPU: "1"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue, **(labels or {})}},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def _job(batch: client.BatchV1Api, namespace: str, name: str) -> Obj:
    return batch.api_client.sanitize_for_serialization(batch.read_namespaced_job(name, namespace))  # type: ignore[no-any-return]


def _complete(job: Obj) -> bool:
    return any(
        c["type"] == "Complete" and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def test_second_gpu_job_waits_for_quota_then_runs(
    custom: client.CustomObjectsApi,
    batch: client.BatchV1Api,
    core: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    cq, lq = make_queues(custom, namespace, gpus=1)
    release = tmp_path / "release"
    batch.create_namespaced_job(namespace, gpu_job("first", lq, _wait_file(release)))
    first_wl = wait_for(
        lambda: workload_of(custom, namespace, "Job", "first"),
        lambda wl: (condition(wl, "Admitted") or {}).get("status") == "True",
        what="first admitted",
    )
    assert (
        first_wl["metadata"]["name"].startswith("job-first-")
        and len(first_wl["metadata"]["name"]) == len("job-first-") + 5
    )
    assert first_wl["status"]["admission"]["clusterQueue"] == cq
    assert first_wl["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU] == "default-flavor"
    assert condition(first_wl, "QuotaReserved")["reason"] == "QuotaReserved"
    wait_for(lambda: _job(batch, namespace, "first")["spec"]["suspend"] is False, what="first unsuspended")

    created = batch.create_namespaced_job(namespace, gpu_job("second", lq, python_cmd("print('second ran')")))
    assert created.spec.suspend is True  # the webhook suspends a queued job at creation
    second_wl = wait_for(
        lambda: workload_of(custom, namespace, "Job", "second"),
        lambda wl: condition(wl, "QuotaReserved") is not None,
        what="second's QuotaReserved condition",
    )
    reserved = condition(second_wl, "QuotaReserved")
    assert reserved["status"] == "False" and reserved["reason"] == "Pending"
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "default-flavor, 1 more needed"
    )
    assert _job(batch, namespace, "second")["spec"]["suspend"] is True
    assert _pods(core, namespace, "job-name=second") == []
    queue = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", lq)
    assert queue["status"]["pendingWorkloads"] == 1 and queue["status"]["admittedWorkloads"] == 1

    release.touch()
    wait_for(lambda: _complete(_job(batch, namespace, "first")), what="first complete", timeout=60)
    finished = wait_for(
        lambda: workload_of(custom, namespace, "Job", "first"),
        lambda wl: (condition(wl, "Finished") or {}).get("status") == "True",
        what="first's Workload finished",
    )
    assert condition(finished, "Finished")["reason"] == "Succeeded"
    wait_for(lambda: _complete(_job(batch, namespace, "second")), what="second complete", timeout=60)
    second_wl = workload_of(custom, namespace, "Job", "second")
    assert (condition(second_wl, "Admitted") or {}).get("status") == "True"
    assert len(_pods(core, namespace, "job-name=second")) == 1  # exactly one pod: never duplicated
