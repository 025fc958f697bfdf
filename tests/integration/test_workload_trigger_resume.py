"""Across a trigger restart, an adopting retry and an API server that goes away, on the local cluster.

- a trigger stopped mid-stream (what a triggerer restart does to it) and a fresh one built from the same
  serialised kwargs relay each training line exactly once between them: the second resumes after the
  cursor the first persisted on the Job (its kwargs carry none);
- the same across a real ``kill -9`` of the process running the trigger, landing between two bursts of
  lines once the first burst's cursor is on the Job (the documented window is a kill within milliseconds
  of a line);
- cursor writes coalesce (a burst costs two patches) and a clean exit flushes the last one at once;
- a silent workload causes no cursor write;
- a wait whose API server stops answering fails after ``[airflow_k8s_ml] api_unreachable_timeout``, naming
  the endpoint and the last error.

Trigger log lines go through Airflow's structlog logger to the captured stdout (``capfd``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from airflow_k8s_ml.kube.async_client import get_kube
from airflow_k8s_ml.kube.resources import resource_for
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchRegistry
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.triggers.log_cursor import CURSOR_ANNOTATION, CursorWriter
from airflow_k8s_ml.triggers.workload import WorkloadTrigger
from tests.cluster_fixtures import use_cluster

from .workload_helpers import in_thread, job, metric, run_trigger, trigger_for

COUNT_TO_30 = "import time\nfor i in range(30):\n    print(f'line {i}', flush=True); time.sleep(0.05)"


def numbers(output: str) -> Counter[int]:
    return Counter(int(n) for n in re.findall(r"\[\w+-\w{5}\] line (\d+)", output))


async def until_output(capfd: pytest.CaptureFixture[str], pattern: str, timeout: float = 20.0) -> str:
    """Read the captured output until ``pattern`` shows up; returns everything read."""
    seen = ""
    deadline = time.monotonic() + timeout
    while re.search(pattern, seen) is None:
        assert time.monotonic() < deadline, f"{pattern!r} never relayed; got {seen[-500:]!r}"
        await asyncio.sleep(0.05)
        seen += capfd.readouterr().out
    return seen


async def test_a_restarted_trigger_relays_each_line_exactly_once(
    client: KubeClient, registry: WatchRegistry, capfd: pytest.CaptureFixture[str]
) -> None:
    obj = await in_thread(client.create, job("chatty", COUNT_TO_30))
    first = trigger_for(obj, try_number=1)
    task = asyncio.create_task(run_trigger(first))
    before = await until_output(capfd, r"\] line 8\b")
    task.cancel()  # the triggerer stops (restart, redistribution): cancel, then cleanup
    await asyncio.gather(task, return_exceptions=True)
    await first.cleanup()
    before += capfd.readouterr().out
    persisted = json.loads(
        (await in_thread(client.get, "batch/v1", "Job", "chatty"))["metadata"]["annotations"][
            CURSOR_ANNOTATION
        ]
    )
    assert persisted["try"] == 1 and len(persisted["streams"]) == 1

    _, kwargs = first.serialize()
    assert kwargs["log_cursor"] is None  # only the cluster remembers where the relay was
    event = await run_trigger(WorkloadTrigger(**json.loads(json.dumps(kwargs))))
    after = capfd.readouterr().out
    assert event.outcome == "succeeded", event.message
    assert "resuming the log relay after the last line relayed for try 1" in after
    first_part, second_part = numbers(before), numbers(after)
    assert first_part and second_part  # the restart really fell in the middle of the stream
    assert first_part + second_part == Counter(range(30))  # each line once, none lost


async def test_cursor_writes_coalesce_and_the_last_is_flushed(
    client: KubeClient, registry: WatchRegistry
) -> None:
    obj = await in_thread(client.create, job("burst", "pass", suspend=True))
    namespace = obj["metadata"]["namespace"]
    cursor: dict[str, dict[str, object]] = {}
    writer = CursorWriter(
        await get_kube(),
        resource_for("batch/v1", "Job"),
        namespace,
        "burst",
        4,
        lambda: cursor,
        logging.getLogger("test"),
        min_interval=60.0,
    )
    for n in range(1, 51):  # a burst of 50 relayed lines
        cursor["burst-abcde"] = {"ts": "2024-05-01T10:00:01.5Z", "n": n}
        writer.mark()
        await asyncio.sleep(0)
    await writer.flush()  # a clean exit: the pending cursor is written at once, not after the interval
    live = await in_thread(client.get, "batch/v1", "Job", "burst")
    value = json.loads(live["metadata"]["annotations"][CURSOR_ANNOTATION])
    assert value == {"try": 4, "streams": {"burst-abcde": {"ts": "2024-05-01T10:00:01.5Z", "n": 50}}}
    assert writer.writes == 2  # the first line at once, then the rest of the burst in one write
    await writer.close()


async def test_a_silent_workload_writes_no_cursor(client: KubeClient, registry: WatchRegistry) -> None:
    obj = await in_thread(client.create, job("quiet", "import time; time.sleep(1)"))
    trigger = trigger_for(obj, try_number=1)
    event = await run_trigger(trigger)
    assert event.outcome == "succeeded", event.message
    assert trigger._logs is not None and trigger._logs.writer is not None
    assert trigger._logs.writer.writes == 0
    live = await in_thread(client.get, "batch/v1", "Job", "quiet")
    assert CURSOR_ANNOTATION not in (live["metadata"].get("annotations") or {})


async def test_an_unreachable_api_server_fails_the_wait_after_the_configured_time(
    fresh_cluster: ClusterThread, registry: WatchRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_cluster(monkeypatch, fresh_cluster.kubeconfig_path, namespace="default")
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__API_UNREACHABLE_TIMEOUT", "1.5")
    client = KubeClient(namespace="default")
    obj = await in_thread(client.create, job("orphan", "pass", suspend=True))
    client.close()
    task = asyncio.create_task(run_trigger(trigger_for(obj, try_number=1), timeout=60))
    deadline = time.monotonic() + 10
    while not any(w.synced for w in registry.watches.values()):  # waiting on a healthy watch
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    endpoint = fresh_cluster.url
    stopping = time.monotonic()  # the budget counts from the first failed request, after this
    await in_thread(fresh_cluster.stop)  # the API server goes away for good
    event = await task
    waited = time.monotonic() - stopping
    assert event.outcome == "error"
    assert event.message.startswith(f"API server {endpoint} unreachable for ")
    assert (
        "(api_unreachable_timeout 1.5s) while waiting for Job default/orphan; last error: " in event.message
    )
    assert "a retry adopts it if so" in event.message
    assert waited >= 1.5


TWO_BURSTS = (
    "import time\n"
    "for i in range(20):\n"
    "    print(f'line {i}', flush=True); time.sleep(0.02)\n"
    "    if i == 9: time.sleep(4)"
)

TRIGGERER = """
import asyncio, json, sys
from airflow_k8s_ml.triggers.workload import WorkloadTrigger

async def main():
    trigger = WorkloadTrigger(**json.loads(sys.argv[1]))
    async for event in trigger.run():
        print("EVENT", event.payload["outcome"], flush=True)

asyncio.run(main())
"""


def _triggerer(kwargs: dict[str, object]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", TRIGGERER, json.dumps(kwargs)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # each relayed line reaches us as it is logged
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _stamp_of(client: KubeClient, namespace: str, pod: str, text: str) -> str:
    """The kubelet's timestamp of the log line ``text`` (what the relay's cursor records)."""
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
    for line in client.get_raw(path, [("timestamps", "true")]).decode().splitlines():
        stamp, _, rest = line.partition(" ")
        if rest == text:
            return stamp
    raise AssertionError(f"{text!r} not in the log of {pod}")


@pytest.mark.slow  # two fresh interpreters importing Airflow: ~15 s on 2 cores
def test_a_kill_9_between_bursts_loses_and_repeats_nothing(client: KubeClient, namespace: str) -> None:
    obj = client.create(job("bursts", TWO_BURSTS, suspend=True))  # starts once the trigger watches it
    kwargs = {
        "kind": "Job",
        "name": "bursts",
        "namespace": namespace,
        "uid": obj["metadata"]["uid"],
        "task_started_at": time.time(),
        "try_number": 1,
    }
    watchers = metric(client, "apiserver_registered_watchers")
    first = _triggerer(kwargs)
    try:
        deadline = time.monotonic() + 60
        while metric(client, "apiserver_registered_watchers") < watchers + 1:
            assert time.monotonic() < deadline and first.poll() is None, "the trigger never watched"
            time.sleep(0.05)
        client.patch("batch/v1", "Job", "bursts", namespace, {"spec": {"suspend": False}})
        before = []
        assert first.stdout is not None
        for line in first.stdout:  # the first burst reaches the trigger's log
            before.append(line)
            if re.search(r"\] line 9\b", line):
                break
        [pod] = client.pods_of("Job", "bursts")
        stamp = _stamp_of(client, namespace, pod["metadata"]["name"], "line 9")
        deadline = time.monotonic() + 10
        while True:  # ... and its cursor reaches the Job
            annotations = (client.get("batch/v1", "Job", "bursts") or {})["metadata"].get("annotations") or {}
            streams = json.loads(annotations.get(CURSOR_ANNOTATION, '{"streams": {}}'))["streams"]
            if any(cursor["ts"] == stamp for cursor in streams.values()):
                break
            assert time.monotonic() < deadline, f"cursor never reached line 9 ({stamp}): {annotations}"
            time.sleep(0.02)
    finally:
        first.send_signal(signal.SIGKILL)  # no cleanup, no flush: the process is gone
        first.wait()
    second = _triggerer(kwargs)
    after, _ = second.communicate(timeout=60)
    assert "EVENT succeeded" in after, after[-3000:]
    assert numbers("".join(before)) + numbers(after) == Counter(range(20)), (before, after)
