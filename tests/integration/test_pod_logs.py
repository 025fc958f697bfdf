"""``pods/log``: follow, timestamps, tailLines, limitBytes, sinceTime, previous, and the 400 messages."""

from __future__ import annotations

import json
import re
import time

import pytest
from kubernetes import client

from .pod_helpers import phase_is, pod_body, read_log, wait_pod

_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ")


def test_follow_streams_lines_while_running_and_ends_on_exit(core: client.CoreV1Api, namespace: str) -> None:
    code = "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.4)\n"
    core.create_namespaced_pod(namespace, pod_body("talker", code))
    wait_pod(core, namespace, "talker", phase_is("Running", "Succeeded"))

    response = core.read_namespaced_pod_log("talker", namespace, follow=True, _preload_content=False)
    arrivals = []
    for line in response.stream(amt=1):
        arrivals.append((line, time.monotonic()))
    text = b"".join(chunk for chunk, _ in arrivals).decode()
    assert text == "line 0\nline 1\nline 2\n"
    assert arrivals[-1][1] - arrivals[0][1] > 0.5, "lines were not streamed as they were written"
    assert core.read_namespaced_pod("talker", namespace).status.phase == "Succeeded"


def test_timestamps_tail_limit_and_since(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod_body("counter", "for i in range(5): print(i)"))
    wait_pod(core, namespace, "counter", phase_is("Succeeded"))

    stamped = read_log(core, namespace, "counter", timestamps=True).splitlines()
    assert len(stamped) == 5 and all(_STAMP.match(line) for line in stamped)
    assert [line.split(" ", 1)[1] for line in stamped] == ["0", "1", "2", "3", "4"]
    assert read_log(core, namespace, "counter", tail_lines=2) == "3\n4\n"
    assert read_log(core, namespace, "counter", limit_bytes=3) == "0\n1"
    assert read_log(core, namespace, "counter", since_seconds=3600) == "0\n1\n2\n3\n4\n"
    assert _since_time(core, namespace, "counter", "2999-01-01T00:00:00Z") == ""
    assert _since_time(core, namespace, "counter", stamped[3].split(" ")[0]) == "3\n4\n"
    assert read_log(core, namespace, "counter", container="main", tail_lines=0) == ""


def _since_time(core: client.CoreV1Api, namespace: str, name: str, since: str) -> str:
    """The Python client has no sinceTime parameter (kubectl logs --since-time sends it)."""
    response = core.api_client.call_api(
        f"/api/v1/namespaces/{namespace}/pods/{name}/log",
        "GET",
        query_params=[("sinceTime", since)],
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    return response.data.decode()


def test_log_errors_use_upstream_messages(core: client.CoreV1Api, namespace: str) -> None:
    body = {
        "metadata": {"name": "duo"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "a", "image": "python:3.11", "command": ["python", "-c", "pass"]},
                {"name": "b", "image": "python:3.11", "command": ["python", "-c", "pass"]},
            ],
        },
    }
    core.create_namespaced_pod(namespace, body)
    waiting = pod_body(
        "waiting",
        "pass",
        volumes=[{"name": "c", "configMap": {"name": "absent"}}],
        container={"volumeMounts": [{"name": "c", "mountPath": "/c"}]},
    )
    core.create_namespaced_pod(namespace, waiting)
    wait_pod(core, namespace, "duo", phase_is("Succeeded"))
    wait_pod(core, namespace, "waiting", lambda p: bool(p.status.container_statuses))

    def error(name: str, **options: object) -> tuple[int, str]:
        with pytest.raises(client.ApiException) as err:
            read_log(core, namespace, name, **options)
        return err.value.status, json.loads(err.value.body)["message"]

    assert error("duo") == (400, "a container name must be specified for pod duo, choose one of: [a b]")
    assert error("duo", container="c") == (400, "container c is not valid for pod duo")
    assert error("waiting") == (
        400,
        'container "main" in pod "waiting" is waiting to start: ContainerCreating',
    )
    assert error("duo", container="a", previous=True) == (
        400,
        'previous terminated container "a" in pod "duo" not found',
    )
    assert error("duo", container="a", tail_lines=-1)[0] == 422
    assert read_log(core, namespace, "duo", container="b") == ""
