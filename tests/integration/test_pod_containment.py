"""A container's processes end with it, ``setsid`` ones included: when its main process exits, when the
pod is deleted and when the cluster stops. Run under both containment mechanisms: the one the machine
allows ("auto": a cgroup v2 per instance where writable) and process-tree tracking as a subreaper."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..cluster_fixtures import fast_settings
from .pod_helpers import container_status, phase_is, pod_body, read_log, wait_pod

# The detached grandchild prints its own pid, then becomes `sleep` (same pid) in a session of its own
# (`$$$$` is the shell's `$$` once the kubelet expanded `$$` to `$`).
DETACH = "setsid sh -c 'echo $$$$; exec sleep 313' &"


def _gone(pid: int) -> bool:
    """No such process, or only its zombie is left (it has been killed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module", params=["auto", "tree"])
def contained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cluster per containment mode; yields its kubeconfig path."""
    settings = fast_settings(tmp_path_factory.mktemp(f"contained-{request.param}"), containment=request.param)
    with ClusterThread(settings) as running:
        yield str(running.kubeconfig_path)


@pytest.fixture()
def ccore(contained: str) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=contained)
    yield client.CoreV1Api(api)
    api.close()


def _detached_pid(core: client.CoreV1Api, namespace: str, name: str) -> int:
    def printed(pod: client.V1Pod) -> bool:
        started = pod.status.phase != "Pending" or any(s.state.running for s in pod.status.container_statuses)
        return started and read_log(core, namespace, name).strip() != ""

    wait_pod(core, namespace, name, printed)
    return int(read_log(core, namespace, name).split()[0])


def test_a_setsid_grandchild_is_gone_after_pod_deletion(ccore: client.CoreV1Api) -> None:
    body = pod_body("detacher", command=["sh", "-c", f"{DETACH} sleep 60"], terminationGracePeriodSeconds=1)
    ccore.create_namespaced_pod("default", body)
    pid = _detached_pid(ccore, "default", "detacher")
    assert not _gone(pid)

    ccore.delete_namespaced_pod("detacher", "default")

    assert _wait_gone(pid), "the setsid grandchild outlived its pod"


def test_a_detached_child_does_not_hold_the_pod_running(ccore: client.CoreV1Api) -> None:
    body = pod_body("leaver", command=["sh", "-c", f"{DETACH} sleep 0.3; exit 3"])
    ccore.create_namespaced_pod("default", body)
    pid = _detached_pid(ccore, "default", "leaver")

    pod = wait_pod(ccore, "default", "leaver", phase_is("Failed"), timeout=10)

    assert container_status(pod).state.terminated.exit_code == 3
    assert _wait_gone(pid), "the detached child outlived the container's main process"
    ccore.delete_namespaced_pod("leaver", "default", grace_period_seconds=0)


def test_a_setsid_grandchild_is_gone_after_cluster_shutdown(tmp_path: Path) -> None:
    with ClusterThread(fast_settings(tmp_path / "c")) as running:
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        core = client.CoreV1Api(api)
        body = pod_body("survivor", command=["sh", "-c", f"{DETACH} sleep 60"], restart="Always")
        core.create_namespaced_pod("default", body)
        pid = _detached_pid(core, "default", "survivor")
        api.close()
    assert _wait_gone(pid, timeout=5), "a setsid grandchild outlived the cluster"
