"""Local cluster figures: pod start latency (create -> process running), list/get throughput, the API's
responsiveness under load (200 ``sleep 2`` Jobs created by 20 client threads: GET pods latency while they
run, and how long until all of them completed), and the API server's RSS with many unread watches on a
large object (bench/watch_memory.py).

Prints figures; asserts nothing (benchmarks are not tests). Runs the cluster on loopback (in-process for
the pod-start and rate figures, as its own process for the load figures),
bounded in time: ``python bench/local_cluster.py [--pods 40] [--seconds 5] [--jobs 200] [--threads 20]
[--watchers 200]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import watch_memory  # bench/watch_memory.py, beside this script
from kubernetes import client, config, watch

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.daemon import ping
from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def pod_start_latency(core: client.CoreV1Api, namespace: str, count: int) -> list[float]:
    """Create pods one at a time; latency = first watch event showing the container running."""
    created_at: dict[str, float] = {}
    running_at: dict[str, float] = {}
    done = threading.Event()
    rv = core.list_namespaced_pod(namespace).metadata.resource_version

    def observe() -> None:
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=120):
            pod = event["object"]
            name = pod.metadata.name
            statuses = pod.status.container_statuses or []
            if name not in running_at and statuses and statuses[0].state.running is not None:
                running_at[name] = time.perf_counter()
                if len(running_at) == count:
                    w.stop()
        done.set()

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    time.sleep(0.2)
    for i in range(count):
        name = f"bench-{i}"
        created_at[name] = time.perf_counter()
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "30"]}],
                },
            },
        )
        time.sleep(0.05)
    done.wait(120)
    for name in list(created_at):
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    return [running_at[n] - created_at[n] for n in created_at if n in running_at]


def throughput(core: client.CoreV1Api, namespace: str, seconds: float, verb: str) -> float:
    for i in range(20):
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": f"cm-{verb}-{i}"}, "data": {"k": "v"}}
        )
    count = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if verb == "list":
            core.list_namespaced_config_map(namespace)
        else:
            core.read_namespaced_config_map(f"cm-{verb}-{count % 20}", namespace)
        count += 1
    return count / seconds


PROBE_INTERVAL = 0.1  # one GET of the 200-pod list every 100 ms (a list costs the server 15-50 ms itself)


def job_body(name: str) -> dict:
    container = {"name": "main", "image": "busybox", "command": ["sleep", "2"]}
    pod_spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]}
    template = {"spec": pod_spec}
    return {"metadata": {"name": name}, "spec": {"backoffLimit": 0, "template": template}}


def load_under_jobs(
    kubeconfig: Path, core: client.CoreV1Api, namespace: str, jobs: int, threads: int
) -> tuple[list[float], float | None]:
    """``jobs`` Jobs created by ``threads`` client threads while one more client GETs the pod list in a loop.

    Returns the GET latencies (seconds) measured until every Job completed, and the time from the first
    create to the last Job's Complete condition as seen by a watch (None if not all completed in 120 s).
    """
    batch = client.BatchV1Api(core.api_client)
    rv = batch.list_namespaced_job(namespace).metadata.resource_version
    complete: set[str] = set()
    all_done = threading.Event()
    done_at: list[float] = []

    def observe() -> None:
        w = watch.Watch()
        for event in w.stream(batch.list_namespaced_job, namespace, resource_version=rv, timeout_seconds=150):
            job = event["object"]
            conditions = job.status.conditions or [] if job.status else []
            if any(c.type == "Complete" and c.status == "True" for c in conditions):
                complete.add(job.metadata.name)
                if len(complete) == jobs:
                    done_at.append(time.perf_counter())
                    w.stop()
        all_done.set()

    latencies: list[float] = []

    def probe() -> None:
        # The raw response (read to its end): the server's latency, not the client's model building.
        while not all_done.is_set():
            start = time.perf_counter()
            core.list_namespaced_pod(namespace, _preload_content=False).read()
            latencies.append(time.perf_counter() - start)
            time.sleep(PROBE_INTERVAL)

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    time.sleep(0.2)
    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    first_create = time.perf_counter()
    names = [f"load-{i}" for i in range(jobs)]

    def create_share(share: list[str]) -> None:
        own = client.BatchV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        for name in share:
            own.create_namespaced_job(namespace, job_body(name))
        own.api_client.close()

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create_share, [names[i::threads] for i in range(threads)]))
    all_done.wait(120)
    all_done.set()
    prober.join(10)
    elapsed = done_at[0] - first_create if done_at else None
    batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
    return latencies, elapsed


@contextlib.contextmanager
def served(state_dir: Path) -> Iterator[Path]:
    """The cluster as its own process, as ``airflow-k8s-ml local up`` runs it: the load's client threads
    then do not share the server's interpreter (and GIL). Yields the kubeconfig path."""
    log = (state_dir / "server.log").open("ab")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "airflow_k8s_ml.testbed.local_cluster",
            "serve",
            "--state-dir",
            str(state_dir),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not ping(state_dir):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the local cluster did not start; see {state_dir}/server.log")
            time.sleep(0.1)
        yield state_dir / "kubeconfig"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def measure_load(jobs: int, threads: int) -> tuple[list[float], float | None]:
    with tempfile.TemporaryDirectory() as state, served(Path(state)) as kubeconfig:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "load"}})
        try:
            return load_under_jobs(kubeconfig, core, "load", jobs, threads)
        finally:
            api.close()


def print_load(latencies: list[float], elapsed: float | None, jobs: int, threads: int) -> None:
    ms = [x * 1000 for x in latencies]
    print(f"under load ({jobs} 'sleep 2' Jobs by {threads} client threads, the server in its own process):")
    if ms:
        print(
            f"  GET pods (raw response) latency: p50 {statistics.median(ms):.1f} ms, "
            f"p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms ({len(ms)} requests, one every "
            f"{PROBE_INTERVAL * 1000:.0f} ms after the previous answer)"
        )
    done = f"{elapsed:.1f} s" if elapsed is not None else "not all within 120 s"
    print(f"  all {jobs} Jobs complete after the first create: {done}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--watchers", type=int, default=200, help="unread watches for the RSS figure")
    parser.add_argument("--only-load", action="store_true", help="skip the pod-start and rate figures")
    args = parser.parse_args()
    load = measure_load(args.jobs, args.threads)
    if args.only_load:
        print_load(*load, args.jobs, args.threads)
        return
    with tempfile.TemporaryDirectory() as state, ClusterThread(ClusterSettings(state_dir=Path(state))) as c:
        api = config.new_client_from_config(config_file=str(c.kubeconfig_path))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "bench"}})
        latencies = pod_start_latency(core, "bench", args.pods)
        list_rate = throughput(core, "bench", args.seconds, "list")
        get_rate = throughput(core, "bench", args.seconds, "get")
        api.close()
    print_load(*load, args.jobs, args.threads)
    ms = [x * 1000 for x in latencies]
    print(f"pods started: {len(ms)}/{args.pods}")
    if ms:
        print(
            f"pod start latency (create -> process running): p50 {statistics.median(ms):.1f} ms, "
            f"p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms"
        )
    print(f"list throughput (20 configmaps per list, one keep-alive HTTPS client): {list_rate:.0f} req/s")
    print(f"get throughput (one keep-alive HTTPS client): {get_rate:.0f} req/s")
    print(watch_memory.report(args.watchers, 1.0))


if __name__ == "__main__":
    main()
