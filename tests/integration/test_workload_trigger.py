"""WorkloadTrigger end to end on the local cluster, through an Airflow connection, with real clients.

Trigger log lines go through Airflow's structlog logger (what the triggerer writes into the task log), so
they are read from the captured output (``capfd``), not ``caplog``.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchRegistry
from airflow_k8s_ml.triggers.workload import WorkloadTrigger

from .workload_helpers import complete, in_thread, job, run_trigger, trigger_for

GPU_MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def relayed(output: str, pattern: str) -> Counter[tuple[str, ...]]:
    """How often each log line was relayed: ``[prefix] text`` lines in the trigger's output."""
    return Counter(re.findall(pattern, output))


async def until_running(client: KubeClient, kind: str, name: str, count: int = 1) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 15
    while True:
        pods = await in_thread(client.pods_of, kind, name)
        if sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running") >= count:
            return pods
        assert time.monotonic() < deadline, f"pods of {name} never ran: {pods}"
        await asyncio.sleep(0.05)


async def test_quick_job_succeeds_and_its_log_is_relayed_once(
    client: KubeClient, registry: WatchRegistry, capfd: pytest.CaptureFixture[str]
) -> None:
    code = "import time\nfor i in range(5):\n    print(f'step {i}', flush=True); time.sleep(0.1)"
    obj = await in_thread(client.create, job("quick", code))
    event = await run_trigger(trigger_for(obj))
    assert event.outcome == "succeeded", event.message
    assert event.state["reason"] == "CompletionsReached" and event.uid == obj["metadata"]["uid"]
    lines = relayed(capfd.readouterr().out, r"\[(quick-\w{5})\] step (\d)")
    assert sorted(i for _, i in lines) == ["0", "1", "2", "3", "4"]
    assert set(lines.values()) == {1}
    pod = next(iter(lines))[0]
    assert event.log_cursor is not None and set(event.log_cursor) == {pod}


async def test_failing_job_reports_backoff_limit_with_each_pods_exit(
    client: KubeClient, registry: WatchRegistry
) -> None:
    code = "import sys\nprint('epoch 1')\nprint('fatal: CUDA error: out of memory', flush=True)\nsys.exit(3)"
    obj = await in_thread(client.create, job("crash", code, backoff=1))
    event = await run_trigger(trigger_for(obj))
    assert event.outcome == "failed"
    assert event.state["reason"] == "BackoffLimitExceeded"
    assert len(event.pods) == 2
    for report in event.pods:
        assert report["exit_code"] == 3 and report["last_lines"][-1] == "fatal: CUDA error: out of memory"
    assert event.message.startswith(f"Job {obj['metadata']['namespace']}/crash failed (BackoffLimitExceeded)")
    assert "exit code 3 (Error): fatal: CUDA error: out of memory" in event.message
    assert any("BackoffLimitExceeded" in w for w in event.warnings)


async def test_admission_deadline_for_a_gpu_request_on_a_cluster_without_gpus(
    client: KubeClient, registry: WatchRegistry
) -> None:
    gpu = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}
    obj = await in_thread(client.create, job("gpu", "print('never')", container=gpu))
    started = time.monotonic()
    event = await run_trigger(trigger_for(obj, deadlines={"admission_timeout": 1.5}))
    elapsed = time.monotonic() - started
    assert event.outcome == "deadline" and event.expired_deadline == "admission_timeout"
    assert event.message == f"admission_timeout 1.5s exceeded: {GPU_MESSAGE}"
    assert elapsed >= 1.5, f"the admission deadline fired early, after {elapsed:.2f} s"
    assert elapsed < 60, f"the admission deadline took {elapsed:.1f} s to fire (a hang; figures: bench/)"
    assert event.pods and GPU_MESSAGE in event.pods[0]["problem"]
    assert any("FailedScheduling" in w for w in event.warnings)


async def test_run_deadline_fires_within_a_second_of_expiry(
    client: KubeClient, registry: WatchRegistry
) -> None:
    obj = await in_thread(
        client.create, job("long", "import time; print('training', flush=True); time.sleep(60)")
    )
    event = await run_trigger(trigger_for(obj, deadlines={"run_timeout": 1.0}))
    detected = time.time()
    assert event.outcome == "deadline" and event.expired_deadline == "run_timeout", event.message
    assert event.message.startswith("run_timeout 1s exceeded: running (Running)")
    pods = await in_thread(client.pods_of, "Job", "long")
    started = min(
        time.mktime(time.strptime(c["state"]["running"]["startedAt"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        for p in pods
        for c in p["status"]["containerStatuses"]
    )
    late = detected - started  # startedAt has whole seconds: the budget never starts early
    assert late >= 1.0, f"run_timeout 1s fired {late:.2f} s after the container started"
    assert late < 60, f"run_timeout 1s fired only {late:.1f} s after the start (a hang; figures: bench/)"
    await in_thread(client.delete, "batch/v1", "Job", "long")


async def test_cleanup_keeps_the_job_and_on_kill_deletes_it_foreground(
    client: KubeClient, registry: WatchRegistry
) -> None:
    obj = await in_thread(client.create, job("killme", "import time; time.sleep(60)"))
    first = trigger_for(obj)
    task = asyncio.create_task(run_trigger(first))
    await until_running(client, "Job", "killme")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await first.cleanup()  # a triggerer restart: the training must go on
    assert await in_thread(client.get, "batch/v1", "Job", "killme") is not None
    await until_running(client, "Job", "killme")

    _, kwargs = first.serialize()
    second = WorkloadTrigger(**kwargs)
    task = asyncio.create_task(run_trigger(second))
    await asyncio.sleep(0.2)
    task.cancel()  # the user marked the task failed: the triggerer cancels, then calls on_kill
    await asyncio.gather(task, return_exceptions=True)
    await second.on_kill()
    await second.cleanup()
    live = await in_thread(client.get, "batch/v1", "Job", "killme")
    assert live is None or "foregroundDeletion" in live["metadata"].get("finalizers", [])
    assert await in_thread(client.wait_gone, "batch/v1", "Job", "killme", None, 20)
    assert await in_thread(client.pods_of, "Job", "killme") == []


async def test_recreated_trigger_still_detects_completion(
    client: KubeClient, registry: WatchRegistry
) -> None:
    obj = await in_thread(
        client.create, job("restart", "import time; time.sleep(1.5); print('done', flush=True)")
    )
    first = trigger_for(obj)
    task = asyncio.create_task(run_trigger(first))
    await until_running(client, "Job", "restart")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await first.cleanup()
    classpath, kwargs = first.serialize()
    assert classpath == "airflow_k8s_ml.triggers.workload.WorkloadTrigger"
    event = await run_trigger(WorkloadTrigger(**kwargs))
    assert event.outcome == "succeeded"


async def test_pytorchjob_logs_are_prefixed_by_replica(
    client: KubeClient, registry: WatchRegistry, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def replica(code: str) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "python:3.11", "command": ["python", "-c", code]}
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

    # As in DDP, the master cannot finish before its worker has run (the PyTorchJob succeeds with its
    # master): the worker prints, then marks; the master prints, then waits for the mark.
    mark = str(tmp_path / "worker-printed")
    rank = "import os, pathlib, time; print('rank', os.environ['RANK'], flush=True)\n"
    master = rank + f"while not os.path.exists({mark!r}): time.sleep(0.05)"
    worker = rank + f"pathlib.Path({mark!r}).touch()"
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(master), "Worker": replica(worker)}},
    }
    obj = await in_thread(client.create, body)
    event = await run_trigger(trigger_for(obj))
    assert event.outcome == "succeeded", event.message
    lines = relayed(capfd.readouterr().out, r"\[(master-0|worker-0)\] rank (\d)")
    assert lines == Counter({("master-0", "0"): 1, ("worker-0", "1"): 1})


async def test_deployment_waits_for_the_rollout(client: KubeClient, registry: WatchRegistry) -> None:
    container = {
        "name": "web",
        "image": "python:3.11",
        "command": ["python", "-c", "import time; time.sleep(60)"],
    }
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}},
        },
    }
    obj = await in_thread(client.create, body)
    status = {
        "observedGeneration": 1,
        "replicas": 1,
        "updatedReplicas": 1,
        "readyReplicas": 1,
        "availableReplicas": 1,
    }

    async def roll_out() -> None:  # what the deployment controller reports once the new pod is available
        await asyncio.sleep(0.3)
        current = await in_thread(client.get, "apps/v1", "Deployment", "web")
        if not (current or {}).get("status", {}).get("availableReplicas"):
            await in_thread(
                client.patch, "apps/v1", "Deployment", "web", None, {"status": status}, subresource="status"
            )

    roller = asyncio.create_task(roll_out())
    event = await run_trigger(trigger_for(obj, deadlines={"deadline": 20}))
    await roller
    assert event.outcome == "succeeded", event.message
    assert event.state["reason"] == "RolledOut" and "successfully rolled out" in event.message


async def test_an_event_is_held_until_min_deferral_seconds_after_the_deferral(
    client: KubeClient, registry: WatchRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workload that ends right after the task deferred is reported no sooner than
    ``min_deferral_seconds`` after the deferral (Airflow 3.3 may otherwise fail the task:
    apache/airflow#71580); one deferred longer ago is reported at once."""
    monkeypatch.setenv("AIRFLOW__AIRFLOW_K8S_ML__MIN_DEFERRAL_SECONDS", "3")
    obj = await in_thread(client.create, job("held", "pass", suspend=True))
    await in_thread(complete, client, "held", obj["metadata"]["namespace"])
    timings: dict[str, float] = {}
    for label, deferred_at in (("just deferred", time.time()), ("deferred 60 s ago", time.time() - 60)):
        started = time.monotonic()
        event = await run_trigger(trigger_for(obj, deferred_at=deferred_at))
        assert event.outcome == "succeeded", event.message
        timings[label] = time.monotonic() - started
    assert timings["just deferred"] >= 2.9, timings
    assert timings["deferred 60 s ago"] < 2.5, timings
