"""Init containers, sidecars, liveness restarts, and that no process outlives its pod or the cluster."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kubernetes import client, config

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread

from ..cluster_fixtures import fast_settings, python_cmd
from .pod_helpers import condition, container_status, phase_is, pod_body, read_log, wait_pod


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_dead(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _container(name: str, code: str, **extra: object) -> dict:
    return {
        "name": name,
        "image": "python:3.11",
        "command": python_cmd(code),
        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
        **extra,
    }


def test_init_containers_run_in_order_before_the_app(core: client.CoreV1Api, namespace: str) -> None:
    append = "open('/shared/order', 'a').write('{}\\n')"
    body = {
        "metadata": {"name": "inits"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [
                _container("first", append.format("first")),
                _container("second", append.format("second")),
            ],
            "containers": [_container("main", "print(open('/shared/order').read(), end='')")],
        },
    }
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "inits", phase_is("Succeeded", "Failed"))
    assert pod.status.phase == "Succeeded"
    assert read_log(core, namespace, "inits") == "first\nsecond\n"
    assert [s.state.terminated.reason for s in pod.status.init_container_statuses] == [
        "Completed",
        "Completed",
    ]
    assert condition(pod, "Initialized").status == "True"


def test_failing_init_container_fails_a_never_pod(core: client.CoreV1Api, namespace: str) -> None:
    body = {
        "metadata": {"name": "bad-init"},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [_container("setup", "raise SystemExit(2)")],
            "containers": [_container("main", "print('never')")],
        },
    }
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "bad-init", phase_is("Failed", "Succeeded"))
    assert pod.status.phase == "Failed"
    assert pod.status.init_container_statuses[0].state.terminated.exit_code == 2
    assert container_status(pod).state.waiting.reason == "PodInitializing"
    initialized = condition(pod, "Initialized")
    assert (initialized.status, initialized.message) == (
        "False",
        "containers with incomplete status: [setup]",
    )


_READ_WHEN_THERE = (
    "import os, time\n"
    "while not os.path.exists('/shared/up'): time.sleep(0.05)\n"
    "print(open('/shared/up').read())\n"
)


def test_sidecar_runs_alongside_and_stops_after_the_app(core: client.CoreV1Api, namespace: str) -> None:
    sidecar = _container(
        "proxy",
        "import os, time; open('/shared/tmp', 'w').write('1')\n"
        "os.rename('/shared/tmp', '/shared/up'); time.sleep(60)",
        restartPolicy="Always",
    )
    body = {
        "metadata": {"name": "sidecar"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [sidecar],
            "containers": [_container("main", _READ_WHEN_THERE)],
        },
    }
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(core, namespace, "sidecar", phase_is("Succeeded", "Failed"))
    assert pod.status.phase == "Succeeded"
    assert read_log(core, namespace, "sidecar", container="main") == "1\n"
    assert pod.status.init_container_statuses[0].state.terminated is not None


def test_failed_liveness_probe_restarts_the_container(core: client.CoreV1Api, namespace: str) -> None:
    server = (
        "import http.server, os\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self): self.send_response(500); self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer(('', 8081), H).serve_forever()\n"
    )
    probe = {"httpGet": {"path": "/healthz", "port": 8081}, "periodSeconds": 1, "failureThreshold": 2}
    body = pod_body(
        "sick", server, restart="Always", terminationGracePeriodSeconds=1, container={"livenessProbe": probe}
    )
    core.create_namespaced_pod(namespace, body)

    pod = wait_pod(
        core,
        namespace,
        "sick",
        lambda p: bool(p.status.container_statuses) and container_status(p).restart_count >= 1,
        timeout=15,
    )
    assert container_status(pod).last_state.terminated.exit_code == 143
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=sick").items
    assert any(
        e.reason == "Unhealthy"
        and e.message == "Liveness probe failed: HTTP probe failed with statuscode: 500"
        for e in events
    )
    assert any(
        e.reason == "Killing" and e.message == "Container main failed liveness probe, will be restarted"
        for e in events
    )


def test_deleting_the_namespace_stops_its_processes(core: client.CoreV1Api, cluster: ClusterThread) -> None:
    namespace = "doomed-ns"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_pod(
        namespace, pod_body("sleeper", "import os, time; print(os.getpid(), flush=True); time.sleep(60)")
    )
    pod = wait_pod(
        core,
        namespace,
        "sleeper",
        lambda p: p.status.phase == "Running" and read_log(core, namespace, "sleeper") != "",
    )
    pid = int(read_log(core, namespace, "sleeper"))
    pod_dir = next((cluster.cluster.settings.state_dir / "pods").glob(f"*{pod.metadata.uid}"))

    core.delete_namespace(namespace)

    assert _wait_dead(pid), "the pod's process survived its namespace"
    deadline = time.monotonic() + 5
    while pod_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pod_dir.exists()


def test_stopping_the_cluster_kills_every_pod_process(tmp_path: Path) -> None:
    with ClusterThread(fast_settings(tmp_path / "c")) as running:
        api = config.new_client_from_config(config_file=str(running.kubeconfig_path))
        core = client.CoreV1Api(api)
        code = (
            "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " print(os.getpid(), flush=True); time.sleep(60)"
        )
        core.create_namespaced_pod("default", pod_body("immortal", code, restart="Always"))
        wait_pod(
            core,
            "default",
            "immortal",
            lambda p: p.status.phase == "Running" and read_log(core, "default", "immortal") != "",
        )
        pid = int(read_log(core, "default", "immortal"))
        api.close()
    assert _wait_dead(pid, timeout=1), "a pod process outlived the cluster"
