"""Pytest fixtures that start a real local cluster (HTTPS on 127.0.0.1) and give real clients for it.

Timings are shrunk through ClusterSettings (never by sleeping in tests): job back-off 0.2 s, crash-loop
back-off 0.2 s, probes 10x faster, grace period default 30 s still honoured unless a test sets it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings, ImageRule, NodeCapacity


def fast_settings(state_dir: Path, **overrides: object) -> ClusterSettings:
    settings = ClusterSettings(
        state_dir=state_dir,
        job_backoff_base=0.2,
        job_backoff_cap=1.0,
        crashloop_backoff_base=0.2,
        crashloop_backoff_cap=1.0,
        resync_period=0.1,
        probe_time_scale=0.1,
        capacity=NodeCapacity(cpu="8", memory="32Gi", gpus=0),
        images=[ImageRule("forbidden.example/*", allow=False)],
        # The operators default to runAsNonRoot and the test images to root (run as root, e.g. in CI
        # containers): warn instead of refusing; tests/integration/test_pod_security.py enforces.
        run_as_non_root="warn",
    )
    for key, value in overrides.items():
        setattr(settings, key, value)
    return settings


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterThread]:
    """One local cluster shared by the session; tests isolate themselves by namespace."""
    state = tmp_path_factory.mktemp("local-cluster")
    with ClusterThread(fast_settings(state)) as running:
        yield running


@pytest.fixture()
def fresh_cluster(tmp_path: Path) -> Iterator[ClusterThread]:
    """A cluster of its own, for tests that change global state (faults, history expiry)."""
    with ClusterThread(fast_settings(tmp_path / "cluster")) as running:
        yield running


def use_cluster(
    monkeypatch: pytest.MonkeyPatch,
    kubeconfig_path: Any,
    conn_id: str = "kubernetes_default",
    namespace: str | None = None,
) -> None:
    """Point the Airflow connection ``conn_id`` at a local cluster (what a user's connection would hold)."""
    extra = {"kube_config_path": str(kubeconfig_path)}
    if namespace is not None:
        extra["namespace"] = namespace
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )


@pytest.fixture()
def kube_conn(cluster: ClusterThread, monkeypatch: pytest.MonkeyPatch) -> str:
    """``kubernetes_default`` pointing at the shared test cluster; the operators' default connection."""
    use_cluster(monkeypatch, cluster.kubeconfig_path)
    return "kubernetes_default"


@pytest.fixture()
def kubeconfig(cluster: ClusterThread, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(cluster.kubeconfig_path)
    monkeypatch.setenv("KUBECONFIG", path)
    return path


@pytest.fixture()
def api_client(kubeconfig: str) -> Iterator[object]:
    from kubernetes import config

    api = config.new_client_from_config(config_file=kubeconfig)
    yield api
    api.close()


@pytest.fixture()
def core(api_client: object) -> object:
    from kubernetes import client

    return client.CoreV1Api(api_client)  # type: ignore[arg-type]


@pytest.fixture()
def batch(api_client: object) -> object:
    from kubernetes import client

    return client.BatchV1Api(api_client)  # type: ignore[arg-type]


@pytest.fixture()
def custom(api_client: object) -> object:
    """The official client's CustomObjectsApi (PyTorchJob, TrainJob, JobSet, Kueue objects)."""
    from kubernetes import client

    return client.CustomObjectsApi(api_client)  # type: ignore[arg-type]


@pytest.fixture()
def namespace(core: object, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (its pods are stopped by the kubelet)."""
    import re
    import uuid

    from kubernetes import client

    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))  # type: ignore[attr-defined]
    yield name
    try:
        core.delete_namespace(name)  # type: ignore[attr-defined]
    except Exception:
        pass


def watch_versions(
    list_fn: Callable[..., Any],
    *list_args: Any,
    name: str,
    until: Callable[[Any], bool],
    timeout: int,
    since: str | None = None,
    describe: Callable[[Any], object] = lambda obj: obj,
) -> list[Any]:
    """Every version of the object ``name`` seen through a watch until ``until`` holds (catches transient
    states polling would miss); ``since`` is a resourceVersion to replay changes from."""
    from kubernetes import watch

    seen: list[Any] = []
    stream = watch.Watch()
    options = {"resource_version": since} if since else {}
    for event in stream.stream(
        list_fn, *list_args, field_selector=f"metadata.name={name}", timeout_seconds=timeout, **options
    ):
        seen.append(event["object"])
        if until(event["object"]):
            stream.stop()
            return seen
    raise AssertionError(
        f"watch on {name} ended before the expected state; last: {describe(seen[-1]) if seen else None}"
    )


T = TypeVar("T")


def wait_for(
    fetch: Callable[[], T],
    until: Callable[[T], object] = bool,
    timeout: float = 30.0,
    *,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``fetch`` until ``until(value)`` holds (by default: until it returns something truthy) and return
    that value. For states that last (a condition set, an object gone); use :func:`watch_versions` to catch
    transient ones. On timeout: ``AssertionError`` naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s; last value: {value!r}")
        time.sleep(interval)


@contextlib.contextmanager
def sigterm_when(
    op: Any, ready: Callable[[], object], what: str, timeout: float = 60.0
) -> Iterator[list[float]]:
    """Inside: once ``ready()`` holds, this process gets a real SIGTERM, handled by ``op.on_kill`` as
    Airflow's task runner handles it; yields the list that holds the moment it was sent (empty: never sent).
    The previous handler is restored on leaving."""
    sent: list[float] = []

    def kill_once_ready() -> None:
        wait_for(ready, timeout=timeout, what=what)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, lambda signum, frame: op.on_kill())  # as Airflow's _on_term
    try:
        threading.Thread(target=kill_once_ready, daemon=True).start()
        yield sent
    finally:
        signal.signal(signal.SIGTERM, previous)


def admin(cluster: ClusterThread, action: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST to the local cluster's admin API (fault injection such as ``evict``, the HPA test ``metrics``)."""
    ctx = ssl.create_default_context(cafile=str(cluster.kubeconfig_path.parent / "ca.crt"))
    request = urllib.request.Request(
        f"{cluster.url}/admin/{action}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=ctx, timeout=20) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def python_cmd(code: str) -> list[str]:
    """A pod command running Python code with the cluster's interpreter (found first on PATH)."""
    return ["python", "-c", code]


__all__ = ["admin", "fast_settings", "python_cmd", "use_cluster", "wait_for", "watch_versions"]
os.environ.setdefault("AIRFLOW_K8S_ML_TEST", "1")
