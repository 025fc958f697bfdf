"""The local cluster executes commands, so: bearer token required, loopback only, private kubeconfig."""

from __future__ import annotations

import socket
import ssl
import stat
import urllib.error
import urllib.request

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread, LocalCluster
from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings


def _get(cluster: ClusterThread, path: str, token: str | None) -> tuple[int, str]:
    ctx = ssl.create_default_context(cafile=str(cluster.kubeconfig_path.parent / "ca.crt"))
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(cluster.url + path, headers=headers), context=ctx, timeout=5
        ) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_requests_without_a_valid_token_get_401(cluster: ClusterThread) -> None:
    for token in (None, "wrong-token"):
        code, body = _get(cluster, "/api/v1/namespaces", token)
        assert code == 401
        assert '"reason": "Unauthorized"' in body
    assert _get(cluster, "/api/v1/namespaces", cluster.token)[0] == 200


def test_kubeconfig_and_token_are_private(cluster: ClusterThread) -> None:
    for path in (
        cluster.kubeconfig_path,
        cluster.kubeconfig_path.parent / "token",
        cluster.kubeconfig_path.parent / "server.key",
    ):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_tls_is_verified_against_the_generated_ca(cluster: ClusterThread) -> None:
    assert cluster.url.startswith("https://127.0.0.1:")
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(cluster.url + "/version", context=ssl.create_default_context(), timeout=5)


def _non_loopback_address() -> str | None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def test_not_reachable_on_a_non_loopback_address(cluster: ClusterThread) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    port = int(cluster.url.rsplit(":", 1)[1])
    with socket.socket() as s:
        s.settimeout(2)
        assert s.connect_ex((address, port)) != 0


def test_refuses_to_bind_a_non_loopback_address(tmp_path) -> None:
    for host in ("0.0.0.0", "10.1.2.3"):
        with pytest.raises(ValueError, match="loopback"):
            LocalCluster(ClusterSettings(state_dir=tmp_path, host=host))
