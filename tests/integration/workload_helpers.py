"""Helpers for the watch and WorkloadTrigger tests: an Airflow connection to a local cluster, Job bodies,
completing a suspended Job through its /status subresource, reading /metrics, running a trigger."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import WatchSettings
from airflow_k8s_ml.triggers.events import WorkloadEvent
from airflow_k8s_ml.triggers.workload import WorkloadTrigger

#: Watch timings for tests: quick backoff, short polls (never sleeping longer than needed).
FAST_WATCH = WatchSettings(backoffs=(0.05, 0.1, 0.2, 0.3), poll_interval=0.3, inactivity_grace=5.0)


def job(name: str, code: str, *, backoff: int = 0, suspend: bool = False, **pod_spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": ["python", "-c", code]}
    container.update(pod_spec.pop("container", {}))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff,
            "suspend": suspend,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container], **pod_spec}},
        },
    }


def complete(client: KubeClient, name: str, namespace: str) -> None:
    """Mark a (suspended) Job complete through /status, as the job controller would: no pod needed."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {
            "type": t,
            "status": "True",
            "reason": "CompletionsReached",
            "lastTransitionTime": now,
            "lastProbeTime": now,
            "message": "Reached expected number of succeeded pods",
        }
        for t in ("SuccessCriteriaMet", "Complete")
    ]
    status = {"conditions": conditions, "succeeded": 1, "startTime": now, "completionTime": now}
    client.patch("batch/v1", "Job", name, namespace, {"status": status}, subresource="status")


def metric(client: KubeClient, name: str, **labels: str) -> float:
    """One sample of the cluster's /metrics, summed over series matching ``labels``."""
    text = client.get_raw("/metrics").decode()
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}(?:{{(.*)}})? ([0-9.e+]+)$", line)
        if match is None:
            continue
        series = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(series.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


async def run_trigger(trigger: Any, timeout: float = 30.0) -> WorkloadEvent:
    """Run a trigger to its one event."""

    async def first() -> WorkloadEvent:
        events = [WorkloadEvent.from_payload(e.payload) async for e in trigger.run()]
        assert len(events) == 1, events
        return events[0]

    return await asyncio.wait_for(first(), timeout)


async def in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Blocking client calls from an async test, off the event loop the triggers run on."""
    return await asyncio.to_thread(fn, *args, **kwargs)


def trigger_for(obj: dict[str, Any], **kwargs: Any) -> WorkloadTrigger:
    """A WorkloadTrigger for an object as the API server returned it (started now unless given)."""
    meta = obj["metadata"]
    kwargs.setdefault("task_started_at", time.time())
    return WorkloadTrigger(
        kind=obj["kind"], name=meta["name"], namespace=meta["namespace"], uid=meta["uid"], **kwargs
    )
