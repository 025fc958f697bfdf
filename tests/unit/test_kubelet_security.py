"""The kubelet's pure security rules: verifyRunAsNonRoot's messages, who a process runs as, the
--deny-host-path message, and reading /proc/net/tcp (against a real socket of this process)."""

from __future__ import annotations

import os
import socket

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.kubelet import listeners
from airflow_k8s_ml.testbed.local_cluster.kubelet.hostpath import deny_host_path
from airflow_k8s_ml.testbed.local_cluster.kubelet.identity import identity, verify_run_as_non_root
from airflow_k8s_ml.testbed.local_cluster.kubelet.runtime import Credentials

META = {"name": "p", "namespace": "ns", "uid": "u-1"}
WHERE = '(pod: "p_ns(u-1)", container: main)'


def _pod(pod_sc: dict | None = None, container_sc: dict | None = None) -> tuple[dict, dict]:
    container = {"name": "main", **({"securityContext": container_sc} if container_sc else {})}
    return {"metadata": META, "spec": {"securityContext": pod_sc or {}, "containers": [container]}}, container


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "image_uid", "expected"),
    [
        ({}, None, 0, None),
        ({"runAsNonRoot": True}, None, 0, f"container has runAsNonRoot and image will run as root {WHERE}"),
        (
            {"runAsNonRoot": True},
            {"runAsUser": 0},
            1000,
            f"container's runAsUser breaks non-root policy {WHERE}",
        ),
        ({"runAsNonRoot": True, "runAsUser": 1000}, None, 0, None),
        ({"runAsNonRoot": True}, None, 1000, None),
        ({"runAsNonRoot": True}, {"runAsNonRoot": False}, 0, None),  # the container's field wins
        (
            {"runAsUser": 1000},
            {"runAsNonRoot": True, "runAsUser": 0},
            0,
            f"container's runAsUser breaks non-root policy {WHERE}",
        ),
    ],
)
def test_verify_run_as_non_root(
    pod_sc: dict, container_sc: dict | None, image_uid: int, expected: str | None
) -> None:
    pod, container = _pod(pod_sc, container_sc)
    assert verify_run_as_non_root(pod, container, image_uid) == expected


def test_identity_as_root_applies_user_group_and_groups() -> None:
    pod, container = _pod(
        {"runAsUser": 1000, "supplementalGroups": [5, 6], "fsGroup": 7}, {"runAsGroup": 2000}
    )
    who = identity(pod, container, image_uid=0, as_root=True)
    assert who.credentials == Credentials(1000, 2000, (5, 6, 7)) and who.uid == 1000 and not who.ignored


def test_identity_as_root_keeps_root_for_a_root_image() -> None:
    pod, container = _pod()
    assert identity(pod, container, image_uid=0, as_root=True).credentials is None


def test_identity_as_a_normal_user_switches_nothing_and_says_what_was_ignored() -> None:
    pod, container = _pod({"runAsUser": os.geteuid() + 1, "fsGroup": 7})
    who = identity(pod, container, image_uid=os.geteuid(), as_root=False)
    assert who.credentials is None and who.uid == os.geteuid()
    assert who.ignored == ("runAsUser", "supplementalGroups/fsGroup")


def test_deny_host_path_names_the_volumes() -> None:
    admit = deny_host_path()
    pod = {
        "metadata": {"name": "peek"},
        "spec": {
            "volumes": [{"name": "a", "hostPath": {"path": "/"}}, {"name": "b", "hostPath": {"path": "/etc"}}]
        },
    }
    with pytest.raises(errors.StatusError) as refused:
        admit(pod, None)
    assert refused.value.code == 403 and refused.value.reason == "Forbidden"
    assert refused.value.message == (
        'pods "peek" is forbidden: violates the local cluster\'s policy (--deny-host-path): '
        'hostPath volumes (volumes "a", "b")'
    )
    assert admit(pod, pod) is pod  # updates are not re-checked (volumes are immutable)


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux procfs")
def test_a_listener_is_found_and_attributed_to_its_process() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        reached = listeners.reached("127.0.0.1", port)
        assert reached is not None and reached.endpoint == f"127.0.0.1:{port}"
        assert listeners.foreign_listener("127.0.0.1", port, [os.getpid()]) is None
        foreign = listeners.foreign_listener("127.0.0.1", port, [])
        assert foreign is not None and f"port {port} is held by pid {os.getpid()}" in foreign
        assert listeners.reached("127.0.0.2", port) is None  # bound to one address, not the wildcard
