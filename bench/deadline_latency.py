"""Deadline and drain latency: the figures the tests used to assert as timing windows.

The tests keep only what is behaviour (a deadline never fires early; a drain returns before its budget
runs out) and generous upper bounds that catch a hang; the figures are measured here, on an idle machine,
``--runs`` times each:

- ``admission_timeout 1.5 s`` on a Job whose pod can never schedule (a GPU on a GPU-less cluster): seconds
  from the trigger's start to its ``deadline`` event (the budget is 1.5 s: the rest is the lateness);
- ``run_timeout 1 s`` on a running Job: seconds from the container's ``startedAt`` to the event;
- the log relay's drain when a finished container's log stream answers 2 s late: seconds the drain took.

    python bench/deadline_latency.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("AIRFLOW__AIRFLOW_K8S_ML__MIN_DEFERRAL_SECONDS", "0")

from airflow_k8s_ml.kube.async_client import close_all, get_kube
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.kube.watch import reset_registry
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings
from airflow_k8s_ml.triggers.logs import LogRelay
from tests.integration.workload_helpers import FAST_WATCH, job, run_trigger, trigger_for

GPU = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}


class SlowLogs:
    """Every log stream answers ``delay`` seconds late (a loaded node)."""

    def __init__(self, kube: Any, delay: float) -> None:
        self.kube, self.delay = kube, delay

    async def stream(self, request: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await self.kube.stream(request)


async def one_round(client: KubeClient, n: int) -> dict[str, float]:
    registry = reset_registry(FAST_WATCH)
    try:
        gpu = client.create(job(f"gpu-{n}", "print('never')", container=GPU))
        started = time.monotonic()
        await run_trigger(trigger_for(gpu, deadlines={"admission_timeout": 1.5}), timeout=120)
        admission = time.monotonic() - started

        long = client.create(job(f"long-{n}", "import time; print('up', flush=True); time.sleep(60)"))
        await run_trigger(trigger_for(long, deadlines={"run_timeout": 1.0}), timeout=120)
        detected = time.time()
        [pod] = client.pods_of("Job", f"long-{n}")
        stamp = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        run = detected - (time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone)

        quick = client.create(job(f"quick-{n}", "print('line', flush=True)"))
        deadline = time.monotonic() + 120
        while True:
            pods = client.pods_of("Job", f"quick-{n}")
            if pods and pods[0]["status"].get("phase") == "Succeeded":
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"Job quick-{n} never succeeded")
            await asyncio.sleep(0.1)
        relay = LogRelay(SlowLogs(await get_kube(), 2.0), quick["metadata"]["namespace"], logging.getLogger())
        relay.update(pods)
        started = time.monotonic()
        await relay.drain(10.0)
        drain = time.monotonic() - started
        await relay.close()
        return {
            "admission_timeout 1.5s fired after": admission,
            "run_timeout 1s after startedAt": run,
            "drain of a 2s-late log": drain,
        }
    finally:
        await registry.close()
        await close_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as state,
        ClusterThread(ClusterSettings(state_dir=Path(state))) as cluster,
    ):
        extra = {"kube_config_path": str(cluster.kubeconfig_path), "namespace": "default"}
        os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
            {"conn_type": "kubernetes", "extra": extra}
        )
        client = KubeClient(namespace="default")
        figures: dict[str, list[float]] = {}
        for n in range(args.runs):
            for name, value in asyncio.run(one_round(client, n)).items():
                figures.setdefault(name, []).append(value)
        client.close()
    for name, values in figures.items():
        print(
            f"{name:34} median {statistics.median(values):6.2f} s  max {max(values):6.2f} s  n={len(values)}"
        )


if __name__ == "__main__":
    main()
