"""Upstream's limits and answers where a client sends too much: 413 over 3 MiB, 422 over 1 MiB of ConfigMap
data, etcd's error over 1.5 MiB, 400 for deep nesting, 422 for volume paths that climb out; and watches
whose memory stays bounded whatever the watchers do."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.daemon import (
    ServeOptions,
    pid_of,
    start_background,
    stop_background,
)
from tests.cluster_fixtures import fast_settings, wait_for

MiB = 1024 * 1024


def _raw(cluster_url: str, token: str, ca: Path, method: str, path: str, body: bytes | None = None) -> Any:
    """(status, decoded JSON body) of one request, errors included."""
    request = urllib.request.Request(
        cluster_url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _request(cluster: ClusterThread, method: str, path: str, body: bytes | None = None) -> Any:
    return _raw(cluster.url, cluster.token, cluster.kubeconfig_path.parent / "ca.crt", method, path, body)


def test_a_body_over_3_mib_gets_413_as_a_status(cluster: ClusterThread, namespace: str) -> None:
    body = json.dumps({"metadata": {"name": "huge"}, "data": {"k": "x" * (4 * MiB)}}).encode()
    code, status = _request(cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
    assert code == 413
    assert status["kind"] == "Status" and status["reason"] == "RequestEntityTooLarge"
    assert status["message"] == "Request entity too large: limit is 3145728"


def test_a_2_mib_configmap_is_refused_and_the_server_stays_up(core: Any, namespace: str) -> None:
    big = {"metadata": {"name": "big"}, "data": {"k": "x" * (2 * MiB)}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(namespace, big)
    assert refused.value.status == 422
    assert json.loads(refused.value.body)["message"] == (
        'ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes'
    )
    assert core.list_namespaced_config_map(namespace).items == []  # nothing stored, still answering


def test_an_object_over_etcds_limit_gets_etcds_error(cluster: ClusterThread, namespace: str) -> None:
    """Kinds without their own size rule hit the storage limit (1.5 MiB), passed on as the API server
    passes etcd's error: 500 ``etcdserver: request is too large``."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "fat"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "args": ["x" * (2 * MiB)]}],
                }
            }
        },
    }
    code, status = _request(
        cluster, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", json.dumps(job).encode()
    )
    assert (code, status["message"]) == (500, "etcdserver: request is too large")
    assert _request(cluster, "GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")[1]["items"] == []


def test_json_nested_5000_deep_gets_a_400_status(cluster: ClusterThread, namespace: str) -> None:
    deep = '{"metadata": {"name": "deep", "labels": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}}"
    code, status = _request(cluster, "POST", f"/api/v1/namespaces/{namespace}/configmaps", deep.encode())
    assert code == 400 and status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert "exceeded max depth" in status["message"]


def _pod_with_items(path: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "escape"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
            "volumes": [{"name": "cfg", "configMap": {"name": "cfg", "items": [{"key": "k", "path": path}]}}],
        },
    }


@pytest.mark.parametrize(
    ("path", "detail"), [("../x", "must not contain '..'"), ("/etc/passwd", "must be a relative path")]
)
def test_a_configmap_item_path_outside_the_volume_gets_422(
    core: Any, namespace: str, path: str, detail: str
) -> None:
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, _pod_with_items(path))
    assert refused.value.status == 422
    assert json.loads(refused.value.body)["message"] == (
        f'Pod "escape" is invalid: spec.volumes[0].configMap.items[0].path: Invalid value: "{path}": {detail}'
    )


def test_services_always_carry_status_load_balancer(cluster: ClusterThread, namespace: str) -> None:
    svc = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    code, created = _request(
        cluster, "POST", f"/api/v1/namespaces/{namespace}/services", json.dumps(svc).encode()
    )
    assert code == 201 and created["status"] == {"loadBalancer": {}}
    listed = _request(cluster, "GET", f"/api/v1/namespaces/{namespace}/services")[1]["items"]
    assert [s["status"] for s in listed] == [{"loadBalancer": {}}]


# -- watches: memory bounded whatever watchers do -------------------------------------------------------
def _open_watch(url: str, token: str, ca: Path, path: str, small_window: bool = False) -> ssl.SSLSocket:
    """A watch whose client does not read; ``small_window`` keeps the kernel from buffering much of what
    the server sends (the worst case for a server's own memory)."""
    import socket

    host, port = url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    sock = context.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
    if small_window:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return sock


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


WATCHERS = 50
RSS_GROWTH_BOUND_MIB = 100  # 50 watchers that never read, 1 MiB object changed 5 times


def test_50_unread_watchers_on_a_1_mib_object_keep_the_server_rss_bounded(tmp_path: Path) -> None:
    """Before: each watcher held its own encodings of every event (a 5 MB object cost ~7.6 MB per
    watcher, never given back); now one encoding is shared and at most a 64 KiB slice waits per socket."""
    options = ServeOptions(state_dir=tmp_path / "state")
    kubeconfig = start_background(options)
    sockets = []
    try:
        core = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        pid = pid_of(options.state_dir)
        assert pid is not None
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "big"}, "data": {"k": "x" * 1_000_000}}
        )
        baseline = _rss_mib(pid)
        token = (options.state_dir / "token").read_text()
        url = config.new_client_from_config(str(kubeconfig)).configuration.host
        for _ in range(WATCHERS):
            sockets.append(
                _open_watch(
                    url,
                    token,
                    options.state_dir / "ca.crt",
                    "/api/v1/namespaces/default/configmaps?watch=true",
                    small_window=True,
                )
            )
        for i in range(5):
            core.patch_namespaced_config_map("big", "default", {"data": {"k": str(i) * 1_000_000}})
        core.list_namespaced_config_map("default")  # the server has served every watcher its share by now
        grown = _rss_mib(pid) - baseline
        print(f"server RSS grew {grown:.1f} MiB with {WATCHERS} unread watchers on a 1 MiB object")
        assert grown < RSS_GROWTH_BOUND_MIB
    finally:
        for sock in sockets:
            sock.close()
        stop_background(options.state_dir)


def test_a_watcher_that_falls_behind_is_closed(tmp_path: Path) -> None:
    settings = fast_settings(tmp_path / "c", watch_buffer=5, watch_stall_grace=0.5)
    with ClusterThread(settings) as c:
        core = client.CoreV1Api(config.new_client_from_config(str(c.kubeconfig_path)))
        sock = _open_watch(
            c.url,
            c.token,
            c.kubeconfig_path.parent / "ca.crt",
            "/api/v1/namespaces/default/configmaps?watch=true",
        )
        wait_for(lambda: c.call(lambda: c.cluster.store.open_watches) == 1, what="the watch registered")
        payload = "y" * 200_000
        for i in range(60):  # far more than the socket buffers hold, and than the watcher may lag
            core.create_namespaced_config_map(
                "default", {"metadata": {"name": f"cm-{i}"}, "data": {"k": payload}}
            )
        wait_for(lambda: c.call(lambda: c.cluster.store.open_watches) == 0, what="the lagging watcher closed")
        sock.settimeout(20)  # a stream that does not end fails the test with TimeoutError
        try:
            while sock.recv(1 << 16):  # the client sees its stream end (and would re-watch)
                pass
        except (ConnectionResetError, ssl.SSLError):
            pass
        finally:
            sock.close()
        assert len(core.list_namespaced_config_map("default").items) == 60
