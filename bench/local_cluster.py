"""Local cluster figures: pod start latency (create -> process running), list/get throughput, and the
API server's RSS with many unread watches on a large object (bench/watch_memory.py).

Prints figures; asserts nothing (benchmarks are not tests). Runs the cluster in-process on loopback,
bounded in time: ``python bench/local_cluster.py [--pods 40] [--seconds 5] [--watchers 200]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import watch_memory  # bench/watch_memory.py, beside this script
from kubernetes import client, config, watch

from airflow_k8s_ml.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.local_cluster.settings import ClusterSettings


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--watchers", type=int, default=200, help="unread watches for the RSS figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as state, ClusterThread(ClusterSettings(state_dir=Path(state))) as c:
        api = config.new_client_from_config(config_file=str(c.kubeconfig_path))
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": "bench"}})
        latencies = pod_start_latency(core, "bench", args.pods)
        list_rate = throughput(core, "bench", args.seconds, "list")
        get_rate = throughput(core, "bench", args.seconds, "get")
        api.close()
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
