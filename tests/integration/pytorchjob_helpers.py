"""Helpers for the PyTorchJob tests: build a job body, create it through CustomObjectsApi, wait for or
watch its conditions, read replica logs. Everything goes through the real ``kubernetes`` client."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client

from ..cluster_fixtures import python_cmd, watch_versions
from . import pod_helpers

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
Job = dict[str, Any]

# Prints the injected distributed environment, one "KEY=value" per line (checked inside the process).
PRINT_ENV = (
    "import os\n"
    "for k in ('MASTER_ADDR', 'PET_MASTER_ADDR', 'MASTER_PORT', 'PET_MASTER_PORT', 'WORLD_SIZE', 'RANK',\n"
    "          'PET_NODE_RANK', 'PET_NPROC_PER_NODE', 'PET_NNODES', 'PYTHONUNBUFFERED'):\n"
    "    print(f'{k}={os.environ.get(k)}')\n"
)
SLEEP = "import time; print('up', flush=True); time.sleep(60)"


def replica(
    code: str, replicas: int | None = 1, restart: str | None = None, **container: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "containers": [
                    {"name": "pytorch", "image": "python:3.11", "command": python_cmd(code), **container}
                ]
            }
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if restart is not None:
        spec["restartPolicy"] = restart
    return spec


def job_body(
    name: str, master: dict[str, Any] | None, worker: dict[str, Any] | None = None, **spec: Any
) -> Job:
    specs = {k: v for k, v in (("Master", master), ("Worker", worker)) if v is not None}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


def create(custom: client.CustomObjectsApi, namespace: str, body: Job) -> Job:
    return custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)  # type: ignore[no-any-return]


def get(custom: client.CustomObjectsApi, namespace: str, name: str) -> Job:
    return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)  # type: ignore[no-any-return]


def patch_spec(custom: client.CustomObjectsApi, namespace: str, name: str, spec: dict[str, Any]) -> Job:
    return custom.patch_namespaced_custom_object(  # type: ignore[no-any-return]
        GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
    )


def condition(job: Job, type_: str) -> dict[str, Any] | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def is_true(type_: str) -> Callable[[Job], bool]:
    return lambda job: (condition(job, type_) or {}).get("status") == "True"


def wait_job(
    custom: client.CustomObjectsApi,
    namespace: str,
    name: str,
    predicate: Callable[[Job], bool],
    timeout: float = 20.0,
) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        job = get(custom, namespace, name)
        if predicate(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {name} did not reach the state in {timeout}s: {job.get('status')}")
        time.sleep(0.05)


def watch_job(
    custom: client.CustomObjectsApi,
    namespace: str,
    name: str,
    until: Callable[[Job], bool],
    timeout: int = 30,
    since: str | None = None,
) -> list[Job]:
    """Every version of the job until ``until`` holds: transient conditions polling would miss.
    ``since`` (a resourceVersion, e.g. the created object's) replays every change after it."""
    return watch_versions(
        custom.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        name=name,
        until=until,
        timeout=timeout,
        since=since,
        describe=lambda job: job.get("status"),
    )


def true_condition_history(versions: list[Job]) -> list[str]:
    """The sequence of distinct sets of True condition types the versions went through, as 'A+B'."""
    history: list[str] = []
    for job in versions:
        true = "+".join(
            c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"
        )
        if true and (not history or history[-1] != true):
            history.append(true)
    return history


def read_log(core: client.CoreV1Api, namespace: str, pod: str) -> str:
    """The ``pytorch`` container's log (read raw: the client's text/plain decoding is broken)."""
    return pod_helpers.read_log(core, namespace, pod, container="pytorch")


def env_lines(log: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in log.splitlines() if "=" in line)


def pod_names(core: client.CoreV1Api, namespace: str) -> list[str]:
    return sorted(p.metadata.name for p in core.list_namespaced_pod(namespace).items)


def service_names(core: client.CoreV1Api, namespace: str) -> list[str]:
    return sorted(s.metadata.name for s in core.list_namespaced_service(namespace).items)


def event_messages(core: client.CoreV1Api, namespace: str, name: str, reason: str) -> list[str]:
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},reason={reason}"
    )
    return [e.message for e in events.items]


def api_error(exc: client.ApiException) -> dict[str, Any]:
    return json.loads(exc.body)  # type: ignore[no-any-return]
