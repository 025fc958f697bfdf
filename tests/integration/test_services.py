"""Services on the local cluster: ClusterIP allocation and headless Services, Endpoints from ready and
unready pods (named targetPorts resolved per pod), and the API server's service and pod proxy."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import wait_for

from .deploy_helpers import echo_container, kubectl, raw_request


def _echo_pod(
    name: str, probe_path: str = "/", labels: dict[str, str] | None = None, port: int = 8080
) -> dict[str, Any]:
    container = echo_container(probe_path=probe_path)
    container["ports"] = [{"name": "http", "containerPort": port}]
    if port != 8080:
        container["command"][-1] = container["command"][-1].replace("8080", str(port))
    return {
        "metadata": {"name": name, "labels": labels or {"app": "echo"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
    }


def _service(name: str, selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "selector": selector or {"app": "echo"},
        "ports": [{"port": 80, "targetPort": "http"}],
    }
    body.update(spec)
    return {"metadata": {"name": name}, "spec": body}


def _ready(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod:
    return wait_for(
        lambda: core.read_namespaced_pod(name, namespace),
        lambda p: any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []),
        what=f"pod {name} ready",
    )


def _proxy(
    cluster: ClusterThread,
    method: str,
    namespace: str,
    target: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    status, _, raw = raw_request(
        cluster, method, f"/api/v1/namespaces/{namespace}/{target}/proxy/{path}", body, headers
    )
    return status, json.loads(raw)


def test_cluster_ip_headless_and_target_port_defaults(core: client.CoreV1Api, namespace: str) -> None:
    first = core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "a"}, "spec": {"selector": {"app": "echo"}, "ports": [{"port": 8080}]}},
    )
    second = core.create_namespaced_service(namespace, _service("b"))
    headless = core.create_namespaced_service(namespace, _service("c", clusterIP="None"))

    assert first.spec.type == "ClusterIP" and first.spec.session_affinity == "None"
    assert first.spec.ports[0].target_port == 8080 and first.spec.ports[0].protocol == "TCP"
    ips = {first.spec.cluster_ip, second.spec.cluster_ip}
    assert len(ips) == 2 and all(
        ipaddress.ip_address(ip) in ipaddress.ip_network("10.96.0.0/12") for ip in ips
    )
    assert first.spec.cluster_ips == [first.spec.cluster_ip] and first.spec.ip_families == ["IPv4"]
    assert (headless.spec.cluster_ip, headless.spec.cluster_ips) == ("None", ["None"])
    replaced = core.replace_namespaced_service(
        "a",
        namespace,
        {
            "metadata": {"name": "a", "resourceVersion": first.metadata.resource_version},
            "spec": {"selector": {"app": "other"}, "ports": [{"port": 8080}]},
        },
    )
    assert replaced.spec.cluster_ip == first.spec.cluster_ip  # a PUT without clusterIP keeps it


def test_endpoints_split_ready_and_unready_pods(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, _echo_pod("ready-a"))
    core.create_namespaced_pod(namespace, _echo_pod("ready-b", port=9090))
    core.create_namespaced_pod(namespace, _echo_pod("never-ready", probe_path="/broken"))
    core.create_namespaced_service(namespace, _service("echo"))
    pods = {name: _ready(core, namespace, name) for name in ("ready-a", "ready-b")}
    unready = wait_for(
        lambda: core.read_namespaced_pod("never-ready", namespace), lambda p: bool(p.status.pod_ip)
    )

    endpoints = wait_for(
        lambda: core.read_namespaced_endpoints("echo", namespace),
        lambda e: (
            sum(len(s.addresses or []) + len(s.not_ready_addresses or []) for s in e.subsets or []) == 3
        ),
        what="three endpoint addresses",
    )
    by_port = {s.ports[0].port: s for s in endpoints.subsets}
    assert set(by_port) == {8080, 9090}  # the named targetPort resolves per pod
    assert [a.ip for a in by_port[9090].addresses] == [pods["ready-b"].status.pod_ip]
    assert [a.ip for a in by_port[8080].addresses] == [pods["ready-a"].status.pod_ip]
    assert [a.ip for a in by_port[8080].not_ready_addresses] == [unready.status.pod_ip]
    assert by_port[8080].addresses[0].target_ref.name == "ready-a"

    core.delete_namespaced_service("echo", namespace)
    wait_for(
        lambda: [e.metadata.name for e in core.list_namespaced_endpoints(namespace).items],
        lambda names: "echo" not in names,
        what="endpoints deleted with the service",
    )


def test_endpoint_slices_follow_pods_and_kubectl_describe_shows_them(
    api_client: client.ApiClient, core: client.CoreV1Api, cluster: ClusterThread, namespace: str
) -> None:
    discovery = client.DiscoveryV1Api(api_client)
    core.create_namespaced_service(namespace, _service("echo"))
    core.create_namespaced_pod(namespace, _echo_pod("echo-1"))
    ip = _ready(core, namespace, "echo-1").status.pod_ip

    def slices() -> list[client.V1EndpointSlice]:
        return discovery.list_namespaced_endpoint_slice(
            namespace, label_selector="kubernetes.io/service-name=echo"
        ).items

    # The slice follows the pod's readiness a moment after the pod reports it: wait for that.
    (found,) = wait_for(
        slices,
        lambda items: (
            len(items) == 1 and bool(items[0].endpoints) and bool(items[0].endpoints[0].conditions.ready)
        ),
        what="one slice with the ready pod",
    )
    assert found.metadata.name.startswith("echo-") and found.address_type == "IPv4"
    assert found.metadata.owner_references[0].kind == "Service"
    assert [(p.name, p.port) for p in found.ports] == [("", 8080)]
    (endpoint,) = found.endpoints
    assert endpoint.addresses == [ip] and endpoint.conditions.ready and endpoint.target_ref.name == "echo-1"
    described = kubectl(cluster, "describe", "service", "echo", "-n", namespace)
    assert described.returncode == 0, described.stderr
    assert f"Endpoints:                {ip}:8080" in described.stdout

    core.delete_namespaced_service("echo", namespace)
    wait_for(slices, lambda items: not items, what="slices collected with their service")


def test_service_proxy_forwards_get_and_post_round_robin(
    core: client.CoreV1Api, cluster: ClusterThread, namespace: str
) -> None:
    for name in ("echo-1", "echo-2"):
        core.create_namespaced_pod(namespace, _echo_pod(name))
    core.create_namespaced_service(namespace, _service("echo"))
    for name in ("echo-1", "echo-2"):
        _ready(core, namespace, name)
    wait_for(
        lambda: core.read_namespaced_endpoints("echo", namespace),
        lambda e: sum(len(s.addresses or []) for s in e.subsets or []) == 2,
    )

    answers = [
        _proxy(
            cluster, "GET", namespace, "services/echo:80", "v1/predict?x=1&y=two", headers={"X-Test": "kept"}
        )
        for _ in range(4)
    ]
    assert {status for status, _ in answers} == {200}
    assert {a["pod"] for _, a in answers} == {"echo-1", "echo-2"}
    first = answers[0][1]
    assert (first["method"], first["path"], first["x_test"], first["auth"]) == (
        "GET",
        "/v1/predict?x=1&y=two",
        "kept",
        None,
    )  # the bearer token never reaches the pod

    status, posted = _proxy(
        cluster,
        "POST",
        namespace,
        "services/http:echo:",
        "predict",
        body=b'{"inputs": [1, 2]}',
        headers={"Content-Type": "application/json"},
    )
    assert status == 200 and posted["method"] == "POST" and posted["body"] == '{"inputs": [1, 2]}'

    via_client = core.connect_post_namespaced_service_proxy_with_path(
        "echo:80", namespace, "predict", _preload_content=False
    )
    assert json.loads(via_client.data)["method"] == "POST"
    status, direct = _proxy(cluster, "GET", namespace, "pods/echo-1:8080", "direct")
    assert status == 200 and (direct["pod"], direct["path"]) == ("echo-1", "/direct")


def test_service_without_ready_endpoints_answers_503(
    core: client.CoreV1Api, cluster: ClusterThread, namespace: str
) -> None:
    core.create_namespaced_service(namespace, _service("nobody", selector={"app": "nobody"}))
    core.create_namespaced_pod(namespace, _echo_pod("unready", probe_path="/broken", labels={"app": "slow"}))
    core.create_namespaced_service(namespace, _service("slow", selector={"app": "slow"}))
    wait_for(lambda: core.read_namespaced_endpoints("slow", namespace), lambda e: bool(e.subsets))
    # the proxy reads the Service's Endpoints (a 404 before the controller wrote them, as upstream): wait for
    # the empty one of the Service no pod matches too (CI once asked before it existed)
    names = ("nobody", "slow")
    wait_for(
        lambda: {e.metadata.name for e in core.list_namespaced_endpoints(namespace).items},
        lambda found: set(names) <= found,
        what="the Endpoints of both Services",
    )

    for service, message in (
        ("nobody", 'no endpoints available for service "nobody"'),
        ("slow", 'no endpoints available for service "slow:80"'),
    ):
        status, body = _proxy(cluster, "GET", namespace, f"services/{service}:80", "")
        assert status == 503
        assert body == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "ServiceUnavailable",
            "code": 503,
        }
    status, body = _proxy(cluster, "GET", namespace, "services/missing:80", "")
    assert status == 404 and body["message"] == 'services "missing" not found'
