"""Small helpers for pod tests: build a pod body, wait for a state, watch transient states, read logs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from ..cluster_fixtures import python_cmd, watch_versions

Pod = client.V1Pod


def pod_body(
    name: str,
    code: str | None = None,
    *,
    command: list[str] | None = None,
    image: str = "python:3.11",
    restart: str = "Never",
    container: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    main: dict[str, Any] = {"name": "main", "image": image, "command": command or python_cmd(code or "pass")}
    main.update(container or {})
    return {"metadata": {"name": name}, "spec": {"restartPolicy": restart, "containers": [main], **spec}}


def wait_pod(
    core: client.CoreV1Api, namespace: str, name: str, predicate: Callable[[Pod], bool], timeout: float = 10.0
) -> Pod:
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if predicate(pod):
            return pod
        if time.monotonic() > deadline:
            raise AssertionError(f"pod {name} did not reach the state in {timeout}s: {pod.status}")
        time.sleep(0.05)


def phase_is(*phases: str) -> Callable[[Pod], bool]:
    return lambda pod: pod.status.phase in phases


def watch_pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    until: Callable[[Pod], bool],
    timeout: int = 15,
    since: str | None = None,
) -> list[Pod]:
    """Every version of the pod seen until ``until`` holds (catches transient states polling would miss);
    ``since`` is a resourceVersion to replay changes from (so nothing between two calls is missed)."""
    return watch_versions(
        core.list_namespaced_pod,
        namespace,
        name=name,
        until=until,
        timeout=timeout,
        since=since,
        describe=lambda pod: pod.status,
    )


def container_status(pod: Pod, name: str = "main") -> client.V1ContainerStatus:
    return next(s for s in pod.status.container_statuses or [] if s.name == name)


def waiting_reason(pod: Pod, name: str = "main") -> str | None:
    statuses = [s for s in pod.status.container_statuses or [] if s.name == name]
    return statuses[0].state.waiting.reason if statuses and statuses[0].state.waiting else None


def read_log(core: client.CoreV1Api, namespace: str, name: str, **options: Any) -> str:
    """The log as text (the client's own decoding of text/plain bodies is broken, so read raw)."""
    response = core.read_namespaced_pod_log(name, namespace, _preload_content=False, **options)
    return response.data.decode()


def events_for(core: client.CoreV1Api, namespace: str, name: str) -> list[client.CoreV1Event]:
    return core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items


def condition(pod: Pod, type_: str) -> client.V1PodCondition | None:
    return next((c for c in pod.status.conditions or [] if c.type == type_), None)
