"""PyTorchJobs that really train: a gloo all-reduce over 1 Master + 2 Workers, and the reference
``finetune`` workload under DDP. Both prove MASTER_ADDR/MASTER_PORT name where the Master listens."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.meta import parse_time

from .pytorchjob_helpers import (
    create,
    is_true,
    job_body,
    read_log,
    replica,
    true_condition_history,
    wait_job,
    watch_job,
)

pytest.importorskip("torch")

ALL_REDUCE = """
import datetime, os
import torch, torch.distributed as dist
print(f"rank={os.environ['RANK']} world_size={os.environ['WORLD_SIZE']}", flush=True)
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(f"all_reduce={value.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_all_reduce_over_master_and_two_workers(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    created = create(
        custom, namespace, job_body("allreduce", replica(ALL_REDUCE), replica(ALL_REDUCE, replicas=2))
    )

    versions = watch_job(
        custom,
        namespace,
        "allreduce",
        is_true("Succeeded"),
        timeout=60,
        since=created["metadata"]["resourceVersion"],
    )

    assert true_condition_history(versions) == ["Created", "Created+Running", "Created+Succeeded"]
    job = versions[-1]
    succeeded = next(c for c in job["status"]["conditions"] if c["type"] == "Succeeded")
    assert (succeeded["reason"], succeeded["message"]) == (
        "PyTorchJobSucceeded",
        "PyTorchJob allreduce is successfully completed.",
    )
    running = next(c for c in job["status"]["conditions"] if c["type"] == "Running")
    assert (running["status"], running["reason"]) == ("False", "PyTorchJobRunning")
    # Workers still running when the Master succeeded are counted succeeded by the next reconcile.
    job = wait_job(
        custom,
        namespace,
        "allreduce",
        lambda j: j["status"]["replicaStatuses"]["Worker"].get("succeeded") == 2,
    )
    statuses = job["status"]["replicaStatuses"]
    assert statuses["Master"].get("succeeded") == 1
    assert not any(s.get("active") or s.get("failed") for s in statuses.values())
    assert parse_time(job["status"]["completionTime"]) >= parse_time(job["status"]["startTime"])

    logs = {}
    for pod in ("allreduce-master-0", "allreduce-worker-0", "allreduce-worker-1"):
        logs[pod] = wait_log(core, namespace, pod, "all_reduce=")
    assert [line.split()[0] for line in (logs[p].splitlines()[0] for p in sorted(logs))] == [
        "rank=0",
        "rank=1",
        "rank=2",
    ]
    assert all("world_size=3" in log and "all_reduce=6" in log for log in logs.values())
    assert sorted(s.metadata.name for s in core.list_namespaced_service(namespace).items) == sorted(logs)


def test_finetune_trains_under_ddp(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    args = [
        "-m",
        "airflow_k8s_ml.workloads.finetune",
        "--epochs",
        "1",
        "--checkpoint-uri",
        f"file://{tmp_path}/ckpt",
        "--max-train-samples",
        "400",
    ]
    env = [{"name": "DIST_TIMEOUT_SECONDS", "value": "60"}]
    master = replica("", command=["python", *args], env=env)
    worker = replica("", command=["python", *args], env=env)
    create(custom, namespace, job_body("finetune", master, worker))

    job = wait_job(
        custom, namespace, "finetune", lambda j: is_true("Succeeded")(j) or is_true("Failed")(j), timeout=90
    )

    master_log = read_log(core, namespace, "finetune-master-0")
    assert is_true("Succeeded")(job), master_log
    assert "world_size=2 rank=0" in master_log and "checkpoint step=1" in master_log
    worker_log = wait_log(core, namespace, "finetune-worker-0", "epoch=1/1")
    assert "world_size=2 rank=1" in worker_log
    assert any(line.startswith("epoch=1/1 ") and line.endswith(" rank=1") for line in worker_log.splitlines())
    assert (tmp_path / "ckpt" / "step-1" / "model.pt").is_file()


def wait_log(core: client.CoreV1Api, namespace: str, pod: str, marker: str, timeout: float = 30) -> str:
    """The replica's log once it contains ``marker`` (a Worker may still be finishing after the job)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        log = ""
        try:
            log = read_log(core, namespace, pod)
        except client.ApiException:
            pass
        if marker in log or time.monotonic() > deadline:
            return log
        time.sleep(0.1)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow  # two 3-process torch jobs: about 30 s on 2 cores
def test_two_jobs_on_one_master_port_rendezvous_each_with_its_own_master(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    """The flaky start: torch's store binds the wildcard, so a second Master on the same MASTER_PORT (the
    default 23456 for every job) failed to bind and restarted while its Workers reached the first job's
    store. The store now binds the pod IP, so both jobs run side by side, and no Master restarts."""
    port = _free_port()
    ports = [{"name": "pytorchjob-port", "containerPort": port}]
    release = tmp_path / "release"
    # The first job keeps its store listening until the test has seen the second job through.
    holding = ALL_REDUCE.replace(
        "dist.destroy_process_group()",
        "import time\n"
        "while not os.path.exists(os.environ['RELEASE']): time.sleep(0.05)\n"
        "dist.destroy_process_group()",
    )
    env = [{"name": "RELEASE", "value": str(release)}]
    first = job_body("first", replica(holding, ports=ports, env=env), replica(holding, replicas=2, env=env))
    create(custom, namespace, first)
    wait_log(core, namespace, "first-master-0", "all_reduce=")
    second = job_body("second", replica(ALL_REDUCE, ports=ports), replica(ALL_REDUCE, replicas=2))
    create(custom, namespace, second)
    try:
        job = wait_job(
            custom, namespace, "second", lambda j: is_true("Succeeded")(j) or is_true("Failed")(j), 90
        )
    finally:
        release.touch()
    assert is_true("Succeeded")(job), read_log(core, namespace, "second-master-0")
    assert is_true("Succeeded")(wait_job(custom, namespace, "first", is_true("Succeeded")))
    for name in ("first", "second"):
        master = core.read_namespaced_pod(f"{name}-master-0", namespace)
        assert master.status.container_statuses[0].restart_count == 0
        for pod in (f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"):
            log = wait_log(core, namespace, pod, "all_reduce=")
            assert "world_size=3" in log and "all_reduce=6" in log, (pod, log)
