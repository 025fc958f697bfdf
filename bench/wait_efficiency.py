"""Wait efficiency: N concurrent waits of our WorkloadTrigger vs the cncf KubernetesJobTrigger.

What it prints, per implementation and N (``--n 100 1000`` by default):

- API requests per waiting job-hour (from the cluster's ``/metrics``, over the wait window only);
- new TCP connections per request (``apiserver_tcp_connections_total`` / requests, same window);
- completion-detection latency p50/p99 (from sending the status PATCH that completes a Job to the
  trigger's event, measured in the waiting process: conservative, it includes the PATCH round trip);
- event-loop lag p99 of the waiting process (a 10 ms ticker's oversleep).

Method (so 1000 waiting Jobs need no 1000 processes): Jobs are created with ``spec.suspend: true`` (the
job controller starts no pod) and each is completed by PATCHing its ``/status`` subresource with the
``SuccessCriteriaMet`` + ``Complete`` conditions the job controller would write; a finished Job is left
alone by the controller. Completions are spread uniformly over ``[hold/3, hold]`` seconds after the waits
start, from a separate thread (the "controller"), and both implementations wait on their own fresh
namespace, one after the other, in the same run against the same cluster. The cluster runs in a child
process (``python -m airflow_k8s_ml.testbed.local_cluster serve``) so its CPU does not count as loop lag of
the waiting process; ``--in-process`` runs it in a thread instead (ClusterThread). Loopback only, bounded:
about ``2 * len(n) * (hold + setup)`` seconds.

    python bench/wait_efficiency.py [--n 100 1000] [--hold 30] [--impl ours cncf] [--cncf-poll 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Both triggers log per wait (the cncf one per poll): at N = 1000 that would drown the report.
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")

from airflow_k8s_ml.kube.sync_client import KubeClient

CONN_ID = "kubernetes_default"


# -- the cluster ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def local_cluster(in_process: bool) -> Iterator[Path]:
    """A local cluster on loopback; yields its kubeconfig path. A child process unless ``in_process``."""
    state = Path(tempfile.mkdtemp(prefix="wait-bench-"))
    try:
        if in_process:
            from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
            from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings

            with ClusterThread(ClusterSettings(state_dir=state)) as running:
                yield running.kubeconfig_path
        else:
            from airflow_k8s_ml.testbed.local_cluster.daemon import (
                ServeOptions,
                start_background,
                stop_background,
            )

            kubeconfig = start_background(ServeOptions(state_dir=state))
            try:
                yield kubeconfig
            finally:
                stop_background(state)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def use_connection(kubeconfig: Path) -> None:
    extra = {"kube_config_path": str(kubeconfig), "namespace": "default"}
    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps({"conn_type": "kubernetes", "extra": extra})


@dataclass
class Sample:
    """Requests by (verb, resource, code), counting watches still open as requests (the API server counts a
    request when it ends, and a shared watch may outlive the window), and accepted TCP connections."""

    requests: Counter[tuple[str, str, str]]
    connections: float


def scrape(client: KubeClient) -> Sample:
    text = client.get_raw("/metrics").decode()
    requests: Counter[tuple[str, str, str]] = Counter()
    connections = 0.0
    for line in text.splitlines():
        match = re.match(
            r'^apiserver_request_total\{verb="(.*?)",resource="(.*?)",code="(.*?)"\} (\S+)$', line
        )
        open_watches = re.match(
            r'^apiserver_longrunning_requests\{verb="WATCH",resource="(.*?)"\} (\S+)$', line
        )
        if match:
            verb, resource, code = match.group(1, 2, 3)
            requests[(verb, resource, code)] += int(float(match.group(4)))
        elif open_watches:
            requests[("WATCH", open_watches.group(1), "open")] += int(float(open_watches.group(2)))
        elif line.startswith("apiserver_tcp_connections_total "):
            connections = float(line.split()[1])
    return Sample(requests, connections)


# -- the workload --------------------------------------------------------------------------------------
def suspended_job(name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "python:3.11", "command": ["python", "-c", "pass"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def complete_status() -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {
            "type": t,
            "status": "True",
            "reason": "CompletionsReached",
            "message": "Reached expected number of succeeded pods",
            "lastTransitionTime": now,
            "lastProbeTime": now,
        }
        for t in ("SuccessCriteriaMet", "Complete")
    ]
    return {"status": {"conditions": conditions, "succeeded": 1, "startTime": now, "completionTime": now}}


def create_namespace_with_jobs(client: KubeClient, namespace: str, n: int) -> list[dict[str, Any]]:
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    with ThreadPoolExecutor(8) as pool:
        bodies = [
            {**suspended_job(f"job-{i}"), "metadata": {"name": f"job-{i}", "namespace": namespace}}
            for i in range(n)
        ]
        return list(pool.map(client.create, bodies))


class Completer(threading.Thread):
    """Completes each Job at its scheduled time (what the job controller would do), recording when."""

    def __init__(
        self, client: KubeClient, namespace: str, names: list[str], start: float, hold: float
    ) -> None:
        super().__init__(daemon=True)
        self.client, self.namespace = client, namespace
        rng = random.Random(42)
        self.schedule = sorted((start + rng.uniform(hold / 3, hold), name) for name in names)
        self.sent: dict[str, float] = {}

    def run(self) -> None:
        for at, name in self.schedule:
            time.sleep(max(0.0, at - time.time()))
            self.sent[name] = time.time()
            self.client.patch(
                "batch/v1", "Job", name, self.namespace, complete_status(), subresource="status"
            )


# -- the waits -----------------------------------------------------------------------------------------
def our_trigger(namespace: str, job: dict[str, Any]) -> Any:
    from airflow_k8s_ml.triggers.workload import WorkloadTrigger

    meta = job["metadata"]
    return WorkloadTrigger(
        kind="Job",
        name=meta["name"],
        namespace=namespace,
        uid=meta["uid"],
        kubernetes_conn_id=CONN_ID,
        task_started_at=time.time(),
    )


def cncf_trigger(namespace: str, job: dict[str, Any], poll: float) -> Any:
    from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger

    return KubernetesJobTrigger(
        job_name=job["metadata"]["name"],
        job_namespace=namespace,
        pod_names=[],
        pod_namespace=namespace,
        base_container_name="main",
        kubernetes_conn_id=CONN_ID,
        poll_interval=poll,
        get_logs=False,
        do_xcom_push=False,
    )


async def wait_one(trigger: Any, name: str, done: dict[str, tuple[float, float]]) -> None:
    started = time.time()
    async for _ in trigger.run():
        done[name] = (started, time.time())
        return


async def lag_probe(stop: asyncio.Event, lags: list[float], tick: float = 0.01) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(tick)
        lags.append(max(0.0, loop.time() - before - tick))


@dataclass
class Result:
    impl: str
    n: int
    requests: int = 0
    by_verb: dict[str, int] = field(default_factory=dict)
    connections: float = 0.0
    job_hours: float = 0.0
    latencies: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    missed: int = 0


async def run_phase(impl: str, n: int, client: KubeClient, hold: float, cncf_poll: float) -> Result:
    namespace = f"bench-{impl}-{n}-{random.randrange(1 << 16):04x}"
    jobs = await asyncio.to_thread(create_namespace_with_jobs, client, namespace, n)
    triggers = [
        our_trigger(namespace, j) if impl == "ours" else cncf_trigger(namespace, j, cncf_poll) for j in jobs
    ]
    before = await asyncio.to_thread(scrape, client)
    done: dict[str, tuple[float, float]] = {}
    stop, lags = asyncio.Event(), list[float]()
    probe = asyncio.create_task(lag_probe(stop, lags))
    start = time.time()
    tasks = [
        asyncio.create_task(wait_one(t, j["metadata"]["name"], done))
        for t, j in zip(triggers, jobs, strict=True)
    ]
    completer = Completer(client, namespace, [j["metadata"]["name"] for j in jobs], start + 1.0, hold)
    completer.start()
    _, pending = await asyncio.wait(tasks, timeout=hold + max(3 * cncf_poll, 30))
    stop.set()
    for task in pending:
        task.cancel()
    await asyncio.gather(probe, *pending, return_exceptions=True)
    after = await asyncio.to_thread(scrape, client)
    result = _account(impl, n, before, after, done, completer.sent, lags)
    result.missed = len(pending)
    await _reset_ours()
    await asyncio.to_thread(client.delete, "v1", "Namespace", namespace, propagation="Background")
    return result


def _account(
    impl: str,
    n: int,
    before: Sample,
    after: Sample,
    done: dict[str, tuple[float, float]],
    sent: dict[str, float],
    lags: list[float],
) -> Result:
    """The waiters' requests: everything in the window but the completer's PATCHes and /metrics scrapes."""
    delta = Counter(after.requests)
    delta.subtract(before.requests)  # an open watch that ended in the window: -1 open, +1 done
    waiters = Counter(
        {k: v for k, v in delta.items() if v and k[1] and not (k[0] == "PATCH" and k[1] == "jobs")}
    )
    by_verb: Counter[str] = Counter()
    for (verb, _, _), count in waiters.items():
        by_verb[verb] += count
    by_verb = +by_verb  # drop verbs whose requests netted to zero (a watch of an earlier phase ending)
    result = Result(impl, n, sum(waiters.values()), dict(by_verb), after.connections - before.connections)
    result.job_hours = sum(end - begin for begin, end in done.values()) / 3600
    result.latencies = [done[name][1] - sent[name] for name in done if name in sent]
    result.lags = lags
    return result


async def _reset_ours() -> None:
    """Between phases: drop our shared watches and clients, so each phase starts cold."""
    from airflow_k8s_ml.kube.async_client import close_all
    from airflow_k8s_ml.kube.watch import reset_registry

    await reset_registry().close()
    await close_all()


# -- report --------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(results: list[Result]) -> None:
    header = (
        f"{'trigger':<8} {'N':>5} {'req/job-h':>10} {'requests':>9} {'conn/req':>9} {'det p50':>8} "
        f"{'det p99':>8} {'lag p99':>8} {'missed':>6}  requests by verb"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        per_hour = r.requests / r.job_hours if r.job_hours else float("nan")
        conn = r.connections / r.requests if r.requests else float("nan")
        print(
            f"{r.impl:<8} {r.n:>5} {per_hour:>10.1f} {r.requests:>9} {conn:>9.3f} "
            f"{pct(r.latencies, 0.5) * 1000:>6.0f}ms {pct(r.latencies, 0.99) * 1000:>6.0f}ms "
            f"{pct(r.lags, 0.99) * 1000:>6.1f}ms {r.missed:>6}  {dict(sorted(r.by_verb.items()))}"
        )
    print(
        "\nreq/job-h: waiter requests in the window / sum of each wait's duration; det: PATCH sent -> event;"
        " lag: 10 ms ticker oversleep in the waiting process."
    )
    for r in results:
        if r.latencies:
            print(
                f"  {r.impl} N={r.n}: waits {len(r.latencies)}, job-hours {r.job_hours:.2f}, "
                f"detection mean {statistics.mean(r.latencies) * 1000:.0f} ms, loop lag max "
                f"{max(r.lags, default=0) * 1000:.1f} ms"
            )


async def warm_up() -> None:
    """Import what both triggers import on first use, so one-time imports are not measured as loop lag."""
    import kubernetes_asyncio.client  # noqa: F401
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook  # noqa: F401
    from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger  # noqa: F401

    from airflow_k8s_ml.kube.async_client import get_kube
    from airflow_k8s_ml.triggers.workload import WorkloadTrigger  # noqa: F401

    await get_kube(CONN_ID)
    await _reset_ours()


async def main_async(args: argparse.Namespace, client: KubeClient) -> list[Result]:
    await warm_up()
    results = []
    for n in args.n:
        for impl in args.impl:
            began = time.monotonic()
            results.append(await run_phase(impl, n, client, args.hold, args.cncf_poll))
            print(f"... {impl} N={n} done in {time.monotonic() - began:.0f}s", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100, 1000], help="concurrent waits per phase")
    parser.add_argument("--hold", type=float, default=30.0, help="completions spread over [hold/3, hold] s")
    parser.add_argument("--impl", nargs="+", default=["ours", "cncf"], choices=["ours", "cncf"])
    parser.add_argument("--cncf-poll", type=float, default=10.0, help="KubernetesJobTrigger poll_interval")
    parser.add_argument(
        "--in-process", action="store_true", help="run the cluster in a thread of this process"
    )
    args = parser.parse_args()
    began = time.monotonic()
    with local_cluster(args.in_process) as kubeconfig:
        print(f"... cluster up in {time.monotonic() - began:.0f}s", flush=True)
        use_connection(kubeconfig)
        client = KubeClient(CONN_ID)
        results = asyncio.run(main_async(args, client))
        client.close()
    report(results)


if __name__ == "__main__":
    main()
