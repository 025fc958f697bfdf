"""Real metrics on the local cluster (issue 27, points 2 and 3), through the real clients and kubectl.

- metrics.k8s.io from the kubelet's cgroup readings: ``kubectl top pods`` shows real CPU for a pod burning
  it, ``kubectl top nodes`` answers, the PodMetrics shape is metrics-server's, and a CPU HPA scales on it;
- custom.metrics.k8s.io/v1beta2 from the service proxy's counts: discovery as a Prometheus adapter's,
  ``MetricValueList`` as upstream's, requests and errors (5xx answers, connection errors) counted per pod;
- an autoscaling/v2 HPA on the ``Pods`` metric ``http_requests_per_second`` scales a Deployment from 2 to 4
  under a bounded load through the service proxy and back to 2 after the scale-down stabilization window;
- without a cgroup (process-tree containment, as when not root) a Warning event says so and a CPU HPA
  reports that no metrics came back, as before.

The cluster here samples cgroups every second, rates requests over 5 s and syncs HPAs every second (the
defaults are metrics-server's 15 s, a 30 s rate window and the HPA's 15 s), so each wait is seconds.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from airflow_k8s_ml.k8s import quantities
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import fast_settings, wait_for

from .deploy_helpers import deployment, echo_deployment, events, kubectl, sleeper_deployment

RATE = "http_requests_per_second"
CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"


def _has_cgroups(cluster: ClusterThread) -> bool:
    return bool(cluster.cluster.controller("kubelet").containment.root)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    settings = fast_settings(
        tmp_path_factory.mktemp("metered"),
        metrics_resolution=1.0,
        request_rate_window=5.0,
        hpa_sync_period=1.0,
    )
    with ClusterThread(settings) as running:
        yield running


@pytest.fixture()
def api(metered: ClusterThread) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(metered.kubeconfig_path))
    yield api_client
    api_client.close()


@pytest.fixture()
def ns(api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    name = request.node.name.lower().replace("_", "-")[:40].strip("-") + f"-{os.getpid() % 10000}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)


def _service(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
    }


def _raw(cluster: ClusterThread, path: str) -> dict[str, Any]:
    done = kubectl(cluster, "get", "--raw", path)
    assert done.returncode == 0, f"kubectl get --raw {path}: {done.stderr}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _values(cluster: ClusterThread, ns: str, metric: str, selector: str) -> dict[str, str]:
    answer = _raw(cluster, f"{CUSTOM}/namespaces/{ns}/pods/*/{metric}?labelSelector={selector}")
    return {item["describedObject"]["name"]: item["value"] for item in answer["items"]}


def _call(core: client.CoreV1Api, ns: str, service: str, path: str) -> int:
    """One request through the service proxy; the status the pod (or the proxy) answered."""
    try:
        core.connect_get_namespaced_service_proxy_with_path(service, ns, path, _request_timeout=10)
    except client.ApiException as exc:
        return int(exc.status)
    return 200


def test_kubectl_top_shows_real_cpu_of_a_busy_pod(
    metered: ClusterThread, api: client.ApiClient, ns: str
) -> None:
    if not _has_cgroups(metered):
        pytest.skip("cgroup readings need root and a writable cgroup v2 hierarchy")
    core = client.CoreV1Api(api)
    burn = {"name": "burn", "image": "python:3.11", "command": ["python", "-c", "while True: pass"]}
    idle = {
        "name": "idle",
        "image": "python:3.11",
        "command": ["python", "-c", "import time; time.sleep(600)"],
    }
    for name, container in (("busy", burn), ("calm", idle)):
        core.create_namespaced_pod(
            ns, {"metadata": {"name": name, "labels": {"app": name}}, "spec": {"containers": [container]}}
        )

    def busy_millicores() -> int:
        done = kubectl(metered, "top", "pods", "-n", ns, "--no-headers")
        rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
        return int(rows["busy"][1].rstrip("m")) if "busy" in rows and rows["busy"][1].endswith("m") else 0

    # A loop burning CPU on a shared 2-core machine gets at least a tenth of a core.
    wait_for(
        busy_millicores, lambda m: m >= 100, timeout=60, interval=0.5, what="kubectl top pods: busy >= 100m"
    )
    metrics = _raw(metered, f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/busy")
    assert metrics["kind"] == "PodMetrics" and metrics["metadata"]["labels"] == {"app": "busy"}
    (usage,) = metrics["containers"]
    assert usage["name"] == "burn"
    assert usage["usage"]["cpu"].endswith("n") and usage["usage"]["memory"].endswith("Ki")
    assert metrics["window"].endswith("s")
    listed = _raw(metered, f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods?labelSelector=app%3Dcalm")
    assert [m["metadata"]["name"] for m in listed["items"]] == ["calm"]
    calm = int(listed["items"][0]["containers"][0]["usage"]["cpu"].rstrip("n"))
    assert calm < int(usage["usage"]["cpu"].rstrip("n")), "a sleeping pod uses less CPU than a burning one"
    nodes = kubectl(metered, "top", "nodes", "--no-headers")
    assert nodes.returncode == 0 and nodes.stdout.split()[0] == "local-node", nodes.stderr
    missing = kubectl(metered, "get", "--raw", f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/nobody")
    assert f'pods.metrics.k8s.io "{ns}/nobody" not found' in missing.stderr


def test_cpu_hpa_scales_on_real_load(metered: ClusterThread, api: client.ApiClient, ns: str) -> None:
    if not _has_cgroups(metered):
        pytest.skip("cgroup readings need root and a writable cgroup v2 hierarchy")
    apps, v2, core = client.AppsV1Api(api), client.AutoscalingV2Api(api), client.CoreV1Api(api)
    burner = {
        "name": "burn",
        "image": "python:3.11",
        "command": ["python", "-c", "while True: pass"],
        "resources": {"requests": {"cpu": "20m"}},
    }
    apps.create_namespaced_deployment(ns, deployment("burn", burner, 1))
    target = {"type": "Utilization", "averageUtilization": 50}
    v2.create_namespaced_horizontal_pod_autoscaler(
        ns,
        {
            "metadata": {"name": "burn"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "burn"},
                "minReplicas": 1,
                "maxReplicas": 2,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": target}}],
            },
        },
    )
    # A loop burning CPU uses far more than half of 20m: the HPA goes to its maximum on the real figure.
    up = wait_for(
        lambda: v2.read_namespaced_horizontal_pod_autoscaler("burn", ns),
        lambda h: h.status.desired_replicas == 2,
        timeout=60,
        interval=0.5,
        what="the CPU HPA scaling up on real load",
    )
    current = up.status.current_metrics[0].resource.current
    # a Quantity in whichever form it comes: "980m", or "1" when the loop had a whole core
    assert current.average_utilization > 50 and quantities.parse(current.average_value) > Decimal("0.01")
    reason = "New size: 2; reason: cpu resource utilization (percentage of request) above target"
    assert ("Normal", "SuccessfulRescale", reason) in events(core, ns, "burn")
    apps.delete_namespaced_deployment("burn", ns)  # stop burning the shared machine's CPU at once


def test_custom_metrics_api_counts_requests_and_errors_per_pod(
    metered: ClusterThread, api: client.ApiClient, ns: str
) -> None:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    discovery = _raw(metered, CUSTOM)
    assert {r["name"]: (r["kind"], r["verbs"], r["namespaced"]) for r in discovery["resources"]} == {
        f"pods/{m}": ("MetricValueList", ["get"], True)
        for m in (RATE, "http_requests_total", "http_request_errors_total")
    }
    groups = {g["name"]: g["preferredVersion"]["version"] for g in _raw(metered, "/apis")["groups"]}
    assert groups["custom.metrics.k8s.io"] == "v1beta2" and groups["metrics.k8s.io"] == "v1beta1"

    apps.create_namespaced_deployment(ns, echo_deployment("echo", replicas=2))
    core.create_namespaced_service(ns, _service("echo"))
    mute = sleeper_deployment("mute")  # running, ready (no probe), listening nowhere: connection refused
    apps.create_namespaced_deployment(ns, mute)
    core.create_namespaced_service(ns, _service("mute"))
    wait_for(
        lambda: _values(metered, ns, "http_requests_total", "app%3Decho"),
        lambda v: len(v) == 2,
        timeout=60,
        what="two running echo pods",
    )
    wait_for(
        lambda: apps.read_namespaced_deployment("echo", ns).status.ready_replicas,
        lambda r: r == 2,
        timeout=60,
        what="echo ready",
    )
    wait_for(lambda: core.read_namespaced_endpoints("mute", ns).subsets, timeout=60, what="mute endpoint")

    codes = [_call(core, ns, "echo", "ok") for _ in range(10)] + [
        _call(core, ns, "echo", "broken") for _ in range(3)
    ]
    assert codes.count(200) == 10 and codes.count(500) == 3
    assert _call(core, ns, "mute", "ok") == 503
    # Read at once (the rate is over the last 5 s): the Python client reads it as a custom object list.
    custom = client.CustomObjectsApi(api)
    rates = custom.list_namespaced_custom_object(
        "custom.metrics.k8s.io", "v1beta2", ns, f"pods/*/{RATE}", label_selector="app=echo"
    )
    assert any(item["value"] != "0" for item in rates["items"]), f"requests within the window: {rates}"

    totals = _values(metered, ns, "http_requests_total", "app%3Decho")
    errors = _values(metered, ns, "http_request_errors_total", "app%3Decho")
    assert sum(int(v) for v in totals.values()) == 13 and all(int(v) > 0 for v in totals.values())
    assert sum(int(v) for v in errors.values()) == 3
    assert list(_values(metered, ns, "http_request_errors_total", "app%3Dmute").values()) == ["1"]

    pod = next(iter(totals))
    answer = _raw(metered, f"{CUSTOM}/namespaces/{ns}/pods/{pod}/{RATE}")
    assert answer["kind"] == "MetricValueList" and answer["apiVersion"] == "custom.metrics.k8s.io/v1beta2"
    (item,) = answer["items"]
    assert set(item) == {"describedObject", "metric", "timestamp", "windowSeconds", "value"}
    assert item["describedObject"] == {"kind": "Pod", "namespace": ns, "name": pod, "apiVersion": "/v1"}
    assert item["metric"] == {"name": RATE} and item["windowSeconds"] == 5

    # Unknown metrics are upstream's 404.
    listed = custom.list_namespaced_custom_object(
        "custom.metrics.k8s.io", "v1beta2", ns, "pods/*/http_requests_total"
    )
    assert {i["describedObject"]["name"] for i in listed["items"]} >= set(totals)
    unknown = kubectl(metered, "get", "--raw", f"{CUSTOM}/namespaces/{ns}/pods/*/queue_length")
    assert "the server could not find the metric queue_length for pods" in unknown.stderr


def test_rps_hpa_scales_from_two_to_four_and_back(
    metered: ClusterThread, api: client.ApiClient, ns: str
) -> None:
    core, apps, v2 = client.CoreV1Api(api), client.AppsV1Api(api), client.AutoscalingV2Api(api)
    apps.create_namespaced_deployment(ns, echo_deployment("web", replicas=2))
    core.create_namespaced_service(ns, _service("web"))
    wait_for(
        lambda: apps.read_namespaced_deployment("web", ns).status.ready_replicas,
        lambda r: r == 2,
        timeout=60,
        what="2 ready",
    )
    v2.create_namespaced_horizontal_pod_autoscaler(
        ns,
        {
            "metadata": {"name": "web"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 2,
                "maxReplicas": 4,
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": RATE},
                            "target": {"type": "AverageValue", "averageValue": "500m"},
                        },
                    }
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 3}},
            },
        },
    )
    idle = wait_for(
        lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", ns),
        lambda h: (h.status.current_metrics or [None])[0] is not None,
        timeout=30,
        what="the HPA reading the rate",
    )
    assert idle.status.current_metrics[0].pods.current.average_value == "0"
    assert idle.status.desired_replicas == 2

    stop = threading.Event()
    sent: list[int] = []

    def load() -> None:  # back-to-back requests until told, or for 120 s at most
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            sent.append(_call(core, ns, "web", "ok"))

    # Two clients calling back to back: several requests a second even on a loaded machine, well above the
    # 500m per pod target of 4 pods, so the HPA holds 4 while they run.
    workers = [threading.Thread(target=load, daemon=True) for _ in range(2)]
    for worker in workers:
        worker.start()
    try:
        up = wait_for(
            lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", ns),
            lambda h: h.status.desired_replicas == 4,
            timeout=90,
            interval=0.5,
            what="scale up to 4 under load",
        )
        wait_for(
            lambda: apps.read_namespaced_deployment("web", ns).status.ready_replicas,
            lambda r: r == 4,
            timeout=90,
            interval=0.5,
            what="4 ready",
        )
        rates = _values(metered, ns, RATE, "app%3Dweb")
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=30)
    assert sent and sent.count(200) == len(sent), f"every request answered: {sorted(set(sent))}"
    assert up.status.current_metrics[0].pods.metric.name == RATE
    assert ("Normal", "SuccessfulRescale", f"New size: 4; reason: pods metric {RATE} above target") in events(
        core, ns, "web"
    )
    assert len(rates) == 4 and any(v != "0" for v in rates.values())

    # No load: the 5 s rate falls to 0, the 3 s stabilization window passes, the HPA goes back to its minimum.
    wait_for(
        lambda: apps.read_namespaced_deployment("web", ns).spec.replicas,
        lambda r: r == 2,
        timeout=90,
        interval=0.5,
        what="scale back to 2 after the window",
    )
    assert ("Normal", "SuccessfulRescale", "New size: 2; reason: All metrics below target") in events(
        core, ns, "web"
    )


def test_without_a_cgroup_a_warning_says_so_and_the_hpa_falls_back(tmp_path: Path) -> None:
    settings = fast_settings(
        tmp_path / "tree", containment="tree", metrics_resolution=1.0, hpa_sync_period=1.0
    )
    with ClusterThread(settings) as cluster:
        api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
        core, apps, v2 = (
            client.CoreV1Api(api_client),
            client.AppsV1Api(api_client),
            client.AutoscalingV2Api(api_client),
        )
        core.create_namespace({"metadata": {"name": "tree"}})
        sleeper = sleeper_deployment("web")
        sleeper["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
        apps.create_namespaced_deployment("tree", sleeper)
        pod = wait_for(
            lambda: [p for p in core.list_namespaced_pod("tree").items if p.status.phase == "Running"],
            timeout=60,
            what="a running pod",
        )[0]
        warning = wait_for(
            lambda: [e for e in events(core, "tree", pod.metadata.name) if e[1] == "MetricsUnavailable"],
            timeout=30,
            what="the MetricsUnavailable event",
        )
        assert warning[0][0] == "Warning" and 'container "main" has no cgroup' in warning[0][2]
        v2.create_namespaced_horizontal_pod_autoscaler(
            "tree",
            {
                "metadata": {"name": "web"},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "maxReplicas": 3,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 50},
                            },
                        }
                    ],
                },
            },
        )
        hpa = wait_for(
            lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", "tree"),
            lambda h: any(c.type == "ScalingActive" for c in h.status.conditions or []),
            timeout=30,
            what="ScalingActive",
        )
        active = next(c for c in hpa.status.conditions if c.type == "ScalingActive")
        assert (active.status, active.reason) == ("False", "FailedGetResourceMetric")
        assert "no metrics returned from resource metrics API" in active.message
        empty = kubectl(cluster, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/tree/pods")
        assert json.loads(empty.stdout)["items"] == []
        api_client.close()
