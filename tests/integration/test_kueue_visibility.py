"""Kueue's on-demand visibility API on the local cluster, through the kubernetes client: with a 1-GPU
ClusterQueue and three queued 1-GPU Jobs, ``pendingworkloads`` lists the two waiting ones at positions
0 and 1 (in the order they are admitted), and the next one moves up when the one ahead is admitted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..cluster_fixtures import wait_for
from . import test_kueue_cluster
from .kueue_helpers import condition, make_queues, workload_of
from .test_kubectl import kubectl
from .test_kueue_cluster import _wait_file, gpu_job

Obj = dict[str, Any]
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


#: The Kueue cluster tests' cluster: its node advertises 4 fake GPUs.
cluster = test_kueue_cluster.cluster


def get_raw(api_client: client.ApiClient, path: str, **query: Any) -> Obj:
    """``kubectl get --raw``: a bearer-token GET of any path, decoded."""
    response = api_client.call_api(
        path,
        "GET",
        query_params=list(query.items()),
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return json.loads(response.data)  # type: ignore[no-any-return]


def _names(summary: Obj) -> list[str]:
    return [item["metadata"]["name"] for item in summary["items"]]


def test_pending_workloads_in_admission_order(
    api_client: client.ApiClient,
    custom: client.CustomObjectsApi,
    batch: client.BatchV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    cq, lq = make_queues(custom, namespace, gpus=1)
    release = tmp_path / "release"
    hold = _wait_file(release)
    uids = {}
    for name in ("a-first", "b-second", "c-third"):  # created in one second: the name breaks the tie
        uids[name] = batch.create_namespaced_job(namespace, gpu_job(name, lq, hold)).metadata.uid
    waiting = {
        name: wait_for(
            lambda n=name: workload_of(custom, namespace, "Job", n),
            lambda wl: condition(wl, "QuotaReserved").get("status") == "False",
            what=f"{name} pending",
        )
        for name in ("b-second", "c-third")
    }
    assert condition(workload_of(custom, namespace, "Job", "a-first"), "Admitted")["status"] == "True"

    in_lq = get_raw(api_client, f"{VISIBILITY}/namespaces/{namespace}/localqueues/{lq}/pendingworkloads")
    assert in_lq["kind"] == "PendingWorkloadsSummary"
    assert in_lq["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert _names(in_lq) == [waiting["b-second"]["metadata"]["name"], waiting["c-third"]["metadata"]["name"]]
    second, third = in_lq["items"]
    assert (second["positionInLocalQueue"], second["positionInClusterQueue"]) == (0, 0)
    assert (third["positionInLocalQueue"], third["positionInClusterQueue"]) == (1, 1)
    assert second["localQueueName"] == lq and second["priority"] == 0
    assert second["metadata"]["namespace"] == namespace
    assert second["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "b-second", "uid": uids["b-second"]}
    ]
    in_cq = get_raw(api_client, f"{VISIBILITY}/clusterqueues/{cq}/pendingworkloads")
    assert in_cq["items"] == in_lq["items"]
    paged = get_raw(api_client, f"{VISIBILITY}/clusterqueues/{cq}/pendingworkloads", offset=1, limit=1)
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in paged["items"]] == [(1, 1)]

    release.touch()  # a-first finishes: b-second is admitted, c-third moves up to position 0
    after = wait_for(
        lambda: get_raw(api_client, f"{VISIBILITY}/namespaces/{namespace}/localqueues/{lq}/pendingworkloads"),
        lambda s: _names(s) == [waiting["c-third"]["metadata"]["name"]],
        what="c-third alone pending",
    )
    assert (after["items"][0]["positionInLocalQueue"], after["items"][0]["positionInClusterQueue"]) == (0, 0)


def test_unknown_queues_discovery_and_token(api_client: client.ApiClient, cluster: ClusterThread) -> None:
    for path, resource in (
        (f"{VISIBILITY}/namespaces/default/localqueues/nope/pendingworkloads", "localqueue"),
        (f"{VISIBILITY}/clusterqueues/nope/pendingworkloads", "clusterqueue"),
    ):
        with pytest.raises(client.ApiException) as err:
            get_raw(api_client, path)
        assert err.value.status == 404
        body = json.loads(err.value.body)
        assert body["reason"] == "NotFound"
        assert body["message"] == f'{resource}.visibility.kueue.x-k8s.io "nope" not found'
    with pytest.raises(client.ApiException) as err:  # only the subresource is served
        get_raw(api_client, f"{VISIBILITY}/namespaces/default/localqueues")
    assert err.value.status == 404

    resources = {r["name"]: r for r in get_raw(api_client, VISIBILITY)["resources"]}
    assert resources["localqueues/pendingworkloads"]["verbs"] == ["get"]
    assert resources["localqueues/pendingworkloads"]["namespaced"] is True
    assert resources["clusterqueues/pendingworkloads"]["namespaced"] is False
    assert resources["localqueues"]["verbs"] == []
    groups = {g["name"] for g in get_raw(api_client, "/apis")["groups"]}
    assert "visibility.kueue.x-k8s.io" in groups

    import requests

    anonymous = requests.get(
        f"{cluster.url}{VISIBILITY}/clusterqueues/nope/pendingworkloads",
        verify=str(cluster.kubeconfig_path.parent / "ca.crt"),
        timeout=10,
    )
    assert anonymous.status_code == 401


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_raw_and_api_resources(
    cluster: ClusterThread, custom: client.CustomObjectsApi, namespace: str, tmp_path: Path
) -> None:
    """As a user asks it: ``kubectl get --raw`` of a LocalQueue's pending workloads (none yet), and the
    group's discovery document."""
    _, lq = make_queues(custom, namespace, gpus=1)
    raw = kubectl(
        cluster,
        tmp_path,
        "get",
        "--raw",
        f"{VISIBILITY}/namespaces/{namespace}/localqueues/{lq}/pendingworkloads",
    )
    assert json.loads(raw.stdout) == {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {"creationTimestamp": None},
        "items": [],
    }
    # Discovery serves the group, with no verbs on clusterqueues/localqueues (upstream's CqREST/LqREST are
    # bare storage), so kubectl api-resources lists none of them, as against a real Kueue.
    listed = kubectl(
        cluster, tmp_path, "api-resources", "--api-group=visibility.kueue.x-k8s.io", "-o", "name"
    )
    assert listed.stdout.split() == []
    served = json.loads(kubectl(cluster, tmp_path, "get", "--raw", VISIBILITY).stdout)
    assert [(r["name"], r["singularName"], r["kind"], r["verbs"]) for r in served["resources"]] == [
        ("clusterqueues", "clusterqueue", "PendingWorkloadsSummary", []),
        ("clusterqueues/pendingworkloads", "", "PendingWorkloadsSummary", ["get"]),
        ("localqueues", "localqueue", "PendingWorkloadsSummary", []),
        ("localqueues/pendingworkloads", "", "PendingWorkloadsSummary", ["get"]),
    ]
