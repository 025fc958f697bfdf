"""Eviction: through the API (``pods/eviction``: graceful delete) and by the kubelet (admin action
``evict``: Failed, reason Evicted, condition DisruptionTarget)."""

from __future__ import annotations

import json

from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import admin

from .pod_helpers import condition, container_status, phase_is, pod_body, read_log, wait_pod, watch_pod

_SLEEPER = "import time; print('up', flush=True); time.sleep(60)"


def _running(core: client.CoreV1Api, namespace: str, name: str) -> None:
    wait_pod(
        core,
        namespace,
        name,
        lambda p: p.status.phase == "Running" and read_log(core, namespace, name) == "up\n",
    )


def test_kubelet_eviction_fails_the_pod(
    core: client.CoreV1Api, namespace: str, cluster: ClusterThread
) -> None:
    core.create_namespaced_pod(namespace, pod_body("victim", _SLEEPER))
    _running(core, namespace, "victim")

    evicted = admin(
        cluster,
        "evict",
        {"namespace": namespace, "name": "victim", "message": "The node was low on resource: memory. "},
    )

    assert evicted["status"]["phase"] == "Failed" and evicted["status"]["reason"] == "Evicted"
    pod = wait_pod(core, namespace, "victim", phase_is("Failed"))
    assert pod.status.message == "The node was low on resource: memory. "
    target = condition(pod, "DisruptionTarget")
    assert (target.status, target.reason) == ("True", "TerminationByKubelet")
    assert container_status(pod).state.terminated.exit_code == 137


def test_eviction_api_deletes_the_pod_gracefully(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("drained", _SLEEPER, terminationGracePeriodSeconds=1))
    _running(core, namespace, "drained")
    before = core.read_namespaced_pod("drained", namespace).metadata.resource_version

    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="drained", namespace=namespace))
    response = core.create_namespaced_pod_eviction("drained", namespace, eviction, _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }

    seen = watch_pod(
        core, namespace, "drained", lambda p: p.metadata.deletion_timestamp is not None, since=before
    )
    target = condition(seen[-1], "DisruptionTarget")
    assert (target.reason, target.message) == ("EvictionByEvictionAPI", "Eviction API: evicting")
    assert seen[-1].metadata.deletion_timestamp is not None
    try:
        wait_pod(core, namespace, "drained", lambda p: False, timeout=5)
    except client.ApiException as gone:
        assert gone.status == 404
