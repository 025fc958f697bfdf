"""Node capacity: pods that do not fit stay Pending (Unschedulable, FailedScheduling); GPUs that fit are
handed out as CUDA_VISIBLE_DEVICES and freed when their pod ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import NodeCapacity

from ..cluster_fixtures import fast_settings
from .pod_helpers import condition, events_for, phase_is, pod_body, read_log, wait_pod


def _gpu_pod(
    name: str, gpus: int, code: str = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"
) -> dict:
    return pod_body(name, code, container={"resources": {"limits": {"nvidia.com/gpu": gpus}}})


def test_gpu_pod_on_a_node_without_gpus_stays_pending(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _gpu_pod("wants-gpu", 1))

    pod = wait_pod(core, namespace, "wants-gpu", lambda p: condition(p, "PodScheduled") is not None)
    scheduled = condition(pod, "PodScheduled")
    assert (pod.status.phase, scheduled.status, scheduled.reason, scheduled.message) == (
        "Pending",
        "False",
        "Unschedulable",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    )
    assert pod.spec.node_name is None
    events = events_for(core, namespace, "wants-gpu")
    assert [(e.type, e.reason, e.source.component, e.message) for e in events] == [
        ("Warning", "FailedScheduling", "default-scheduler", scheduled.message)
    ]


def test_several_insufficient_resources_are_listed_sorted(core: client.CoreV1Api, namespace: str) -> None:
    body = pod_body(
        "huge",
        "pass",
        container={
            "resources": {"requests": {"memory": "1Ti", "cpu": "100"}, "limits": {"nvidia.com/gpu": 2}}
        },
    )
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "huge", lambda p: condition(p, "PodScheduled") is not None)
    assert condition(pod, "PodScheduled").message == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Insufficient nvidia.com/gpu."
    )


@pytest.fixture()
def gpu_core(tmp_path: Path) -> Iterator[client.CoreV1Api]:
    settings = fast_settings(tmp_path / "gpu-cluster", capacity=NodeCapacity(cpu="4", memory="8Gi", gpus=2))
    with ClusterThread(settings) as running:
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        yield client.CoreV1Api(api)
        api.close()


def test_gpus_are_handed_out_and_freed(gpu_core: client.CoreV1Api) -> None:
    core, ns = gpu_core, "default"
    hold = "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True); time.sleep(30)"
    core.create_namespaced_pod(ns, _gpu_pod("one", 1, hold))
    wait_pod(
        core,
        ns,
        "one",
        lambda p: read_log(core, ns, "one") == "0\n" if p.status.phase == "Running" else False,
    )
    core.create_namespaced_pod(ns, _gpu_pod("two", 2))

    pending = wait_pod(core, ns, "two", lambda p: condition(p, "PodScheduled") is not None)
    assert (
        condition(pending, "PodScheduled").message
        == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    assert core.read_node("local-node").status.capacity["nvidia.com/gpu"] == "2"

    core.delete_namespaced_pod("one", ns, grace_period_seconds=0)
    wait_pod(core, ns, "two", phase_is("Succeeded"))
    assert read_log(core, ns, "two") == "0,1\n"
    assert condition(core.read_namespaced_pod("two", ns), "PodScheduled").status == "True"
