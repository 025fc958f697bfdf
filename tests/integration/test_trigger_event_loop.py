"""The first WorkloadTrigger of a fresh triggerer does not do its heavy work on the event loop.

A triggerer's loop is shared by every deferred task, and its watchdog warns ("async thread was blocked")
when it stalls. What used to stall it for seconds on the first trigger: importing ``aiohttp`` (which builds
an SSL context with the system CAs at import), ``kubernetes_asyncio`` (~800 model classes, enough to set
off a full GC of Airflow's heap) and the cncf hooks module (which imports the sync ``kubernetes``), and
loading the connection and kubeconfig. This checks the structure, not a timing: in a fresh interpreter
with Airflow loaded, an audit hook records which thread imported each of those modules while the trigger
ran to its event - none may be the loop's thread. (Stall figures: ``bench/trigger_loop_lag.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import use_cluster

from .workload_helpers import job

REPO = Path(__file__).resolve().parents[2]

FRESH_TRIGGERER = """
import asyncio, json, sys, threading, time
import airflow.triggers.base  # what a triggerer has loaded before its first trigger

HEAVY = ("aiohttp", "kubernetes_asyncio", "kubernetes", "airflow.providers.cncf.kubernetes")
on_loop = []
loop_thread = threading.get_ident()

def audit(event, args):
    if event == "import" and threading.get_ident() == loop_thread:
        name = str(args[0])
        if name.split(".")[0] in HEAVY or name.startswith(HEAVY[-1]):
            on_loop.append(name)

sys.addaudithook(audit)

async def main():
    from airflow._shared.module_loading import import_string

    trigger_class = import_string("airflow_k8s_ml.triggers.workload.WorkloadTrigger")  # as the triggerer
    trigger = trigger_class(**json.loads(sys.argv[1]))
    async for event in trigger.run():
        await trigger.cleanup()
        from airflow_k8s_ml.kube.async_client import close_all
        from airflow_k8s_ml.kube.watch import get_registry

        await get_registry().close()
        await close_all()
        return event.payload["outcome"]

outcome = asyncio.run(main())
print(json.dumps({"outcome": outcome, "imported_on_the_loop": sorted(set(on_loop))}))
"""


def test_the_first_trigger_imports_and_connects_off_the_loop(
    cluster: ClusterThread, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_cluster(monkeypatch, cluster.kubeconfig_path, namespace="default")
    client = KubeClient(namespace=namespace)
    obj: dict[str, Any] = client.create(job("first", "print('hello', flush=True)"))
    client.close()
    kwargs = {
        "kind": "Job",
        "name": "first",
        "namespace": namespace,
        "uid": obj["metadata"]["uid"],
        "task_started_at": 0,
        "try_number": 1,
    }
    out = subprocess.run(
        [sys.executable, "-c", FRESH_TRIGGERER, json.dumps(kwargs)],
        cwd=REPO,
        env={**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(next(line for line in out.stdout.splitlines() if line.startswith('{"outcome"')))
    assert report["outcome"] == "succeeded"
    assert report["imported_on_the_loop"] == []
