"""Services: admission defaults and allocation, Endpoints from pods, proxy path parsing."""

from __future__ import annotations

import copy
import ipaddress
import random
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.controllers.service.admission import Allocator, admit_service
from airflow_k8s_ml.testbed.local_cluster.controllers.service.endpoints import endpoints_for, find_port
from airflow_k8s_ml.testbed.local_cluster.controllers.service.endpointslices import plan
from airflow_k8s_ml.testbed.local_cluster.controllers.service.proxy import (
    raw_subpath,
    split_scheme_name_port,
)


def allocator(used: set[str] | None = None) -> Allocator:
    return Allocator(lambda: set(used or ()), lambda: set(), random.Random(7))


def service(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
    body.update(spec)
    return {"metadata": {"name": "web", "namespace": "ns"}, "spec": body}


def pod(name: str, ip: str | None, ready: bool = True, port: int = 8080, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": "web"}, **meta},
        "spec": {
            "nodeName": "local-node",
            "containers": [{"ports": [{"name": "http", "containerPort": port}]}],
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_defaults_and_cluster_ip_allocation() -> None:
    admitted = admit_service(allocator())(service(ports=[{"port": 8080}]), None)
    spec = admitted["spec"]
    assert (spec["type"], spec["sessionAffinity"], spec["internalTrafficPolicy"]) == (
        "ClusterIP",
        "None",
        "Cluster",
    )
    assert spec["ports"] == [{"port": 8080, "protocol": "TCP", "targetPort": 8080}]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("10.96.0.0/12")
    assert spec["clusterIPs"] == [spec["clusterIP"]] and spec["ipFamilies"] == ["IPv4"]
    headless = admit_service(allocator())(service(clusterIP="None"), None)["spec"]
    assert (headless["clusterIP"], headless["clusterIPs"]) == ("None", ["None"])
    node_port = admit_service(allocator())(service(type="NodePort"), None)["spec"]
    assert (
        30000 <= node_port["ports"][0]["nodePort"] <= 32767
        and node_port["externalTrafficPolicy"] == "Cluster"
    )


def test_requested_address_must_be_free_and_in_range() -> None:
    with pytest.raises(errors.StatusError) as taken:
        admit_service(allocator({"10.96.0.20"}))(service(clusterIP="10.96.0.20"), None)
    assert taken.value.message == (
        'Service "web" is invalid: spec.clusterIPs: Invalid value: []string{"10.96.0.20"}: '
        "failed to allocate IP 10.96.0.20: provided IP is already allocated"
    )
    with pytest.raises(errors.StatusError) as outside:
        admit_service(allocator())(service(clusterIP="192.168.0.1"), None)
    assert "is not in the valid range. The range of valid IPs is 10.96.0.0/12" in outside.value.message


def test_update_keeps_the_address_and_rejects_changes() -> None:
    admit = admit_service(allocator())
    old = admit(service(), None)
    assert admit(service(), old)["spec"]["clusterIP"] == old["spec"]["clusterIP"]
    moved = copy.deepcopy(old)
    moved["spec"]["clusterIP"] = "10.96.9.9"
    with pytest.raises(errors.StatusError) as caught:
        admit(moved, old)
    assert caught.value.message.endswith(
        'spec.clusterIPs[0]: Invalid value: []string{"10.96.9.9"}: may not change once set'
    )


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([], "spec.ports: Required value"),
        ([{"port": 80}, {"port": 81}], "spec.ports[0].name: Required value"),
        ([{"port": 0}], "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive"),
    ],
)
def test_port_validation(ports: list[dict[str, Any]], expected: str) -> None:
    with pytest.raises(errors.StatusError) as caught:
        admit_service(allocator())(service(ports=ports), None)
    assert expected in caught.value.message


def test_endpoints_resolve_named_ports_and_split_readiness() -> None:
    pods = [
        pod("a", "127.42.0.2"),
        pod("b", "127.42.0.1", port=9090),
        pod("c", "127.42.0.3", ready=False),
        pod("no-ip", None),
        pod("leaving", "127.42.0.9", deletionTimestamp="2024-01-01T00:00:00Z"),
        {**pod("other", "127.42.0.8"), "metadata": {"name": "other", "labels": {"app": "x"}}},
    ]
    endpoints = endpoints_for(admit_service(allocator())(service(), None), pods)
    subsets = {s["ports"][0]["port"]: s for s in endpoints["subsets"]}
    assert [a["ip"] for a in subsets[8080]["addresses"]] == ["127.42.0.2"]
    assert [a["ip"] for a in subsets[8080]["notReadyAddresses"]] == ["127.42.0.3"]
    assert [a["ip"] for a in subsets[9090]["addresses"]] == ["127.42.0.1"]
    assert subsets[8080]["addresses"][0]["targetRef"] == {
        "kind": "Pod",
        "namespace": "ns",
        "name": "a",
        "uid": "uid-a",
    }
    assert find_port(pods[0], {"targetPort": "missing"}) is None


def test_headless_endpoints_are_labelled_and_publish_not_ready() -> None:
    spec = {"clusterIP": "None", "publishNotReadyAddresses": True}
    endpoints = endpoints_for(service(**spec), [pod("c", "127.42.0.3", ready=False)])
    assert endpoints["metadata"]["labels"] == {"service.kubernetes.io/headless": ""}
    assert [a["ip"] for a in endpoints["subsets"][0]["addresses"]] == ["127.42.0.3"]
    assert "subsets" not in endpoints_for(service(), [])


def test_proxy_ids_and_paths() -> None:
    assert split_scheme_name_port("web") == ("", "web", "")
    assert split_scheme_name_port("web:80") == ("", "web", "80")
    assert split_scheme_name_port("https:web:https") == ("https", "web", "https")
    with pytest.raises(errors.StatusError):
        split_scheme_name_port("ftp:web:21")
    assert raw_subpath("/api/v1/namespaces/ns/services/web:80/proxy/a%2Fb/c?x=1") == "/a%2Fb/c"
    assert raw_subpath("/api/v1/namespaces/ns/services/proxy:80/proxy/") == "/"


def test_endpoint_slices_group_ports_and_keep_terminating_pods() -> None:
    svc = {**admit_service(allocator())(service(), None), "apiVersion": "v1", "kind": "Service"}
    svc["metadata"]["uid"] = "svc-uid"
    pods = [
        pod("a", "127.42.0.2"),
        pod("b", "127.42.0.1", port=9090),
        pod("c", "127.42.0.3", ready=False),
        pod("leaving", "127.42.0.9", deletionTimestamp="2024-01-01T00:00:00Z"),
    ]
    creates, updates, deletes = plan(svc, pods, [])
    assert not updates and not deletes
    by_port = {s["ports"][0]["port"]: s for s in creates}
    assert set(by_port) == {8080, 9090}
    first = by_port[8080]
    assert first["metadata"]["generateName"] == "web-" and first["addressType"] == "IPv4"
    assert first["metadata"]["labels"] == {
        "kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    }
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert first["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]
    conditions = {e["targetRef"]["name"]: e["conditions"] for e in first["endpoints"]}
    assert conditions == {
        "a": {"ready": True, "serving": True, "terminating": False},
        "c": {"ready": False, "serving": False, "terminating": False},
        "leaving": {"ready": False, "serving": True, "terminating": True},
    }
    existing = {**by_port[9090], "metadata": {**by_port[9090]["metadata"], "name": "web-x"}}
    creates, updates, deletes = plan(svc, pods[1:2], [existing])
    assert (creates, updates, deletes) == ([], [], [])
    creates, updates, deletes = plan(svc, [], [existing])
    assert len(updates) == 0 and deletes == [existing] and creates[0]["endpoints"] == []  # placeholder slice
