"""Kueue on the local cluster, through the kubernetes client: queued Jobs and PyTorchJobs wait for quota
with upstream's Workload conditions, are admitted whole, release quota when they finish, and a
higher-priority workload preempts a lower one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import NodeCapacity, QueueQuota

from ..cluster_fixtures import fast_settings, python_cmd, wait_for, watch_versions
from .kueue_helpers import (
    GPU,
    GROUP,
    QUEUE_LABEL,
    VERSION,
    condition,
    make_priority_classes,
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


def _wait_true(custom: client.CustomObjectsApi, namespace: str, kind: str, name: str, type_: str) -> Obj:
    """The Workload of the ``kind`` object ``name`` once its condition ``type_`` is True."""
    return wait_for(
        lambda: workload_of(custom, namespace, kind, name),
        lambda wl: condition(wl, type_).get("status") == "True",
        timeout=60,
        what=f"{type_} of the Workload of {kind} {name}",
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
    first_wl = _wait_true(custom, namespace, "Job", "first", "Admitted")
    assert (
        first_wl["metadata"]["name"].startswith("job-first-")
        and len(first_wl["metadata"]["name"]) == len("job-first-") + 5
    )
    assert first_wl["status"]["admission"]["clusterQueue"] == cq
    assert first_wl["status"]["admission"]["podSetAssignments"][0]["flavors"][GPU] == "default-flavor"
    assert condition(first_wl, "QuotaReserved")["reason"] == "QuotaReserved"
    wait_for(lambda: _job(batch, namespace, "first")["spec"]["suspend"] is False, what="first unsuspended")
    ready = _wait_true(custom, namespace, "Job", "first", "PodsReady")
    assert (
        condition(ready, "PodsReady")["message"] == "All pods reached readiness and the workload is running"
    )

    created = batch.create_namespaced_job(namespace, gpu_job("second", lq, python_cmd("print('second ran')")))
    assert created.spec.suspend is True  # the webhook suspends a queued job at creation
    second_wl = wait_for(
        lambda: workload_of(custom, namespace, "Job", "second"),
        lambda wl: condition(wl, "QuotaReserved"),
        what="second's QuotaReserved condition",
    )
    reserved = condition(second_wl, "QuotaReserved")
    assert reserved["status"] == "False" and reserved["reason"] == "Pending"
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "default-flavor, 1 more needed"
    )
    assert _job(batch, namespace, "second")["spec"]["suspend"] is True
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={second_wl['metadata']['name']}"
    )
    assert [(e.reason, e.message) for e in events.items] == [("Pending", reserved["message"])]
    assert _pods(core, namespace, "job-name=second") == []
    queue = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "localqueues", lq)
    assert queue["status"]["pendingWorkloads"] == 1 and queue["status"]["admittedWorkloads"] == 1

    release.touch()
    wait_for(lambda: _complete(_job(batch, namespace, "first")), what="first complete", timeout=60)
    finished = _wait_true(custom, namespace, "Job", "first", "Finished")
    assert condition(finished, "Finished")["reason"] == "Succeeded"
    wait_for(lambda: _complete(_job(batch, namespace, "second")), what="second complete", timeout=60)
    second_wl = workload_of(custom, namespace, "Job", "second")
    assert condition(second_wl, "Admitted").get("status") == "True"
    assert len(_pods(core, namespace, "job-name=second")) == 1  # exactly one pod: never duplicated


def _pytorchjob(name: str, queue: str, workers: int, code: str) -> Obj:
    def replica(count: int) -> Obj:
        container = {
            "name": "pytorch",
            "image": "python:3.11",
            "command": python_cmd(code),
            "resources": {"limits": {GPU: "1"}},
        }
        return {
            "replicas": count,
            "restartPolicy": "Never",
            "template": {"spec": {"containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


def test_gang_is_never_partly_started_and_is_admitted_whole(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    cq, lq = make_queues(custom, namespace, gpus=2)
    body = _pytorchjob("gang", lq, 2, "print('rank up')")
    created = custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", body)
    assert created["spec"]["runPolicy"]["suspend"] is True
    wl = wait_for(
        lambda: workload_of(custom, namespace, "PyTorchJob", "gang"),
        lambda w: condition(w, "QuotaReserved"),
        what="gang's QuotaReserved condition",
    )
    assert wl["metadata"]["name"].startswith("pytorchjob-gang-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    assert condition(wl, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor "
        "default-flavor, 1 more needed"
    )
    assert _pods(core, namespace, "training.kubeflow.org/job-name=gang") == []

    set_gpu_quota(custom, cq, 3)
    admitted = _wait_true(custom, namespace, "PyTorchJob", "gang", "Admitted")
    usage = {a["name"]: a["resourceUsage"][GPU] for a in admitted["status"]["admission"]["podSetAssignments"]}
    assert usage == {"master": "1", "worker": "2"}
    finished = _wait_true(custom, namespace, "PyTorchJob", "gang", "Finished")
    assert condition(finished, "Finished")["reason"] == "Succeeded"
    assert len(_pods(core, namespace, "training.kubeflow.org/job-name=gang")) == 3


def test_higher_priority_workload_preempts_lower_one(
    custom: client.CustomObjectsApi, batch: client.BatchV1Api, core: client.CoreV1Api, namespace: str
) -> None:
    _, lq = make_queues(custom, namespace, gpus=1, preemption="LowerPriority")
    low_class, high_class = "low-" + namespace[-6:], "high-" + namespace[-6:]
    make_priority_classes(custom, **{low_class: 10, high_class: 1000})
    sleeper = python_cmd("import time; time.sleep(120)")
    batch.create_namespaced_job(
        namespace, gpu_job("low", lq, sleeper, {"kueue.x-k8s.io/priority-class": low_class})
    )
    wait_for(lambda: _pods(core, namespace, "job-name=low"), what="low's pod")
    low_wl = workload_of(custom, namespace, "Job", "low")
    low_pod = _pods(core, namespace, "job-name=low")[0].metadata.name
    low_job_version = batch.read_namespaced_job("low", namespace).metadata.resource_version
    assert low_wl and low_wl["spec"]["priority"] == 10
    assert low_wl["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": low_class,
    }

    batch.create_namespaced_job(
        namespace,
        gpu_job("high", lq, python_cmd("print('high')"), {"kueue.x-k8s.io/priority-class": high_class}),
    )
    seen = watch_versions(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        "workloads",
        name=low_wl["metadata"]["name"],
        until=lambda w: condition(w, "Evicted").get("status") == "True",
        timeout=30,
        since=low_wl["metadata"]["resourceVersion"],
    )
    evicted = condition(seen[-1], "Evicted")
    # The evicted job is suspended again (never deleted and recreated), and its pod goes away.
    watch_versions(
        batch.list_namespaced_job,
        namespace,
        name="low",
        until=lambda j: j.spec.suspend is True,
        timeout=30,
        since=low_job_version,
    )
    wait_for(
        lambda: low_pod not in [p.metadata.name for p in _pods(core, namespace, "job-name=low")],
        what="the preempted pod deleted",
    )
    assert evicted and evicted["reason"] == "Preempted"
    high_wl = wait_for(lambda: workload_of(custom, namespace, "Job", "high"), what="high's workload")
    job_uid = high_wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]
    assert evicted["message"] == (
        f"Preempted to accommodate a workload (UID: {high_wl['metadata']['uid']}, JobUID: {job_uid}) "
        "due to prioritization in the ClusterQueue"
    )
    wait_for(lambda: _complete(_job(batch, namespace, "high")), what="high complete", timeout=60)
    # The low job was stopped (suspended, its pod deleted) and requeued; with the GPU free again it is
    # admitted anew, its eviction kept as history.
    readmitted = _wait_true(custom, namespace, "Job", "low", "Admitted")
    assert condition(readmitted, "Evicted")["status"] == "False"
    assert condition(readmitted, "Evicted")["message"].startswith("Previously: Preempted to accommodate")
    assert condition(readmitted, "Requeued").get("reason") == "Preempted"


def test_deleting_a_job_deletes_its_workload(
    custom: client.CustomObjectsApi, batch: client.BatchV1Api, namespace: str
) -> None:
    _, lq = make_queues(custom, namespace, gpus=0)
    batch.create_namespaced_job(namespace, gpu_job("doomed", lq, python_cmd("pass")))
    wait_for(lambda: workload_of(custom, namespace, "Job", "doomed"), what="workload")
    batch.delete_namespaced_job("doomed", namespace)
    wait_for(lambda: not workload_of(custom, namespace, "Job", "doomed"), what="workload deleted")


def test_kubectl_get_queues_and_workloads(
    cluster: ClusterThread,
    custom: client.CustomObjectsApi,
    batch: client.BatchV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    import shutil

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    from .test_kubectl import kubectl

    cq, lq = make_queues(custom, namespace, gpus=0)
    batch.create_namespaced_job(namespace, gpu_job("waiting", lq, python_cmd("pass")))
    wl = wait_for(
        lambda: workload_of(custom, namespace, "Job", "waiting"),
        lambda w: condition(w, "QuotaReserved"),
        what="pending workload",
    )
    wait_for(
        lambda: custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq).get("status", {}),
        lambda s: s.get("pendingWorkloads") == 1,
        what="cq pending count",
    )
    cqs = kubectl(cluster, tmp_path, "get", "clusterqueue", cq).stdout.splitlines()
    assert cqs[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"]
    assert cqs[1].split() == [cq, "1"]
    wide = kubectl(cluster, tmp_path, "get", "cq", cq, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    assert wide[1].split() == [cq, "BestEffortFIFO", "1", "0"]
    lqs = kubectl(cluster, tmp_path, "get", "-n", namespace, "localqueues").stdout.splitlines()
    assert lqs[0].split() == ["NAME", "CLUSTERQUEUE", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
    assert lqs[1].split() == [lq, cq, "1", "0"]
    wls = kubectl(cluster, tmp_path, "get", "-n", namespace, "workloads").stdout.splitlines()
    assert wls[0].split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
    assert wls[1].split()[:2] == [wl["metadata"]["name"], lq]
    together = kubectl(
        cluster, tmp_path, "get", "-n", namespace, "clusterqueues,localqueues,workloads"
    ).stdout
    for shown in (
        f"clusterqueue.kueue.x-k8s.io/{cq}",
        f"localqueue.kueue.x-k8s.io/{lq}",
        "workload.kueue.x-k8s.io/",
    ):
        assert shown in together


def test_queued_trainjob_waits_then_runs_whole(custom: client.CustomObjectsApi, namespace: str) -> None:
    cq, lq = make_queues(custom, namespace, gpus=1)
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "labels": {QUEUE_LABEL: lq}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 2,
                "image": "python:3.11",
                "command": python_cmd("print('node up')"),
                "resourcesPerNode": {"limits": {GPU: "1"}},
            },
        },
    }
    created = custom.create_namespaced_custom_object(
        "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", body
    )
    assert created["spec"]["suspend"] is True
    wl = wait_for(
        lambda: workload_of(custom, namespace, "TrainJob", "tj"),
        lambda w: condition(w, "QuotaReserved"),
        what="the TrainJob's QuotaReserved condition",
    )
    assert wl["metadata"]["name"].startswith("trainjob-tj-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2)]
    assert condition(wl, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor "
        "default-flavor, request > maximum capacity (2 > 1)"
    )
    set_gpu_quota(custom, cq, 2)
    _wait_true(custom, namespace, "TrainJob", "tj", "Admitted")
    finished = _wait_true(custom, namespace, "TrainJob", "tj", "Finished")
    assert condition(finished, "Finished")["reason"] == "Succeeded"


def test_default_queue_from_settings_admits_a_job(tmp_path: Path) -> None:
    """What `local up --gpus 1 --gpu-quota 1` starts: upstream's sample queue, ready for a queued Job."""
    from kubernetes import config

    settings = fast_settings(tmp_path / "c", capacity=NodeCapacity(gpus=1), queue_quota=QueueQuota(gpus=1))
    with ClusterThread(settings) as running:
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        try:
            custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)
            cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", "cluster-queue")
            flavor = cq["spec"]["resourceGroups"][0]["flavors"][0]
            assert flavor["name"] == "default-flavor"
            assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}[GPU] == "1"
            batch.create_namespaced_job("default", gpu_job("hello", "user-queue", python_cmd("print('hi')")))
            finished = _wait_true(custom, "default", "Job", "hello", "Finished")
            assert finished["status"]["admission"]["clusterQueue"] == "cluster-queue"
        finally:
            api.close()
