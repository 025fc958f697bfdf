"""PyTorchJob failure handling by restart policy, and the run policy: backoffLimit, activeDeadlineSeconds,
cleanPodPolicy, suspend/resume and ttlSecondsAfterFinished, with the training operator's conditions,
reasons and messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import admin, wait_for

from .pytorchjob_helpers import (
    PRINT_ENV,
    SLEEP,
    condition,
    create,
    env_lines,
    event_messages,
    get,
    is_true,
    job_body,
    patch_spec,
    pod_names,
    read_log,
    replica,
    service_names,
    true_condition_history,
    wait_job,
    watch_job,
)

FAIL = "raise SystemExit(3)"


def _running(custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, name: str) -> None:
    wait_job(custom, namespace, name, is_true("Running"))
    wait_for(
        lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(namespace).items),
        what="every replica running",
    )


def test_worker_failing_under_never_fails_the_job(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    create(custom, namespace, job_body("never", replica(SLEEP), replica(FAIL, restart="Never")))

    job = wait_job(custom, namespace, "never", is_true("Failed"))

    failed = condition(job, "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "PyTorchJobFailed",
        "PyTorchJob never is failed because 1 Worker replica(s) failed.",
    )
    assert job["status"]["completionTime"]
    assert job["status"]["replicaStatuses"]["Worker"]["failed"] == 1
    assert "PyTorchJob never is failed because 1 Worker replica(s) failed." in event_messages(
        core, namespace, "never", "PyTorchJobFailed"
    )
    # Sticky: the Master keeps running (cleanPodPolicy None) but nothing changes the conditions any more.
    conditions = job["status"]["conditions"]
    wait_for(lambda: core.read_namespaced_pod("never-master-0", namespace).status.phase == "Running")
    assert get(custom, namespace, "never")["status"]["conditions"] == conditions


def test_evicted_replica_is_recreated_under_on_failure(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, cluster: ClusterThread
) -> None:
    created = create(custom, namespace, job_body("evict", replica(SLEEP), replica(SLEEP)))
    _running(custom, core, namespace, "evict")
    old_uid = core.read_namespaced_pod("evict-worker-0", namespace).metadata.uid

    admin(cluster, "evict", {"namespace": namespace, "name": "evict-worker-0"})

    restarted: list[bool] = []

    def running_again(job: dict) -> bool:
        restarted.append(is_true("Restarting")(job) or any(restarted))
        return any(restarted) and is_true("Running")(job)

    versions = watch_job(
        custom, namespace, "evict", running_again, since=created["metadata"]["resourceVersion"]
    )
    history = true_condition_history(versions)
    assert history[-2:] == ["Created+Restarting", "Created+Running"], history
    assert "job evict is restarting because Worker replica(s) failed." in event_messages(
        core, namespace, "evict", "PyTorchJobRestarting"
    )
    restarting = [condition(v, "Restarting") for v in versions if is_true("Restarting")(v)][-1]
    assert restarting is not None and restarting["reason"] == "PyTorchJobRestarting"
    wait_for(lambda: core.read_namespaced_pod("evict-worker-0", namespace).status.phase == "Running")
    assert core.read_namespaced_pod("evict-worker-0", namespace).metadata.uid != old_uid


def test_replaced_master_gets_a_new_address_and_workers_follow_it(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, cluster: ClusterThread
) -> None:
    create(custom, namespace, job_body("remaster", replica(PRINT_ENV + SLEEP), replica(PRINT_ENV + SLEEP)))
    _running(custom, core, namespace, "remaster")
    first_ip = core.read_namespaced_pod("remaster-master-0", namespace).status.pod_ip

    admin(cluster, "evict", {"namespace": namespace, "name": "remaster-master-0"})

    def follows_new_master() -> bool:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        master, worker = pods.get("remaster-master-0"), pods.get("remaster-worker-0")
        if master is None or worker is None or not master.status.pod_ip or master.status.pod_ip == first_ip:
            return False
        try:  # the worker may be replaced between the list and the log read
            return env_lines(read_log(core, namespace, "remaster-worker-0")).get("MASTER_ADDR") == (
                master.status.pod_ip
            )
        except client.ApiException:
            return False

    wait_for(follows_new_master, what="the worker to be recreated with the new Master address")
    assert is_true("Running")(get(custom, namespace, "remaster"))


def test_exit_code_policy_retries_signals_and_fails_on_errors(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    marker = tmp_path / "killed-once"
    worker_code = (
        "import os, pathlib, signal\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "if not marker.exists():\n"
        "    marker.write_text('x')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "raise SystemExit(1)\n"
    )
    create(custom, namespace, job_body("exitcode", replica(SLEEP), replica(worker_code, restart="ExitCode")))

    job = wait_job(custom, namespace, "exitcode", is_true("Failed"))

    assert event_messages(core, namespace, "exitcode", "PyTorchJobRestarting")[0] == (
        "job exitcode is restarting because Worker replica(s) failed."
    )  # the 137 exit was retried
    failed = condition(job, "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "PyTorchJobFailed",
        'job "exitcode" is failing because "Worker" replica(s) failed.',
    )
    exits = event_messages(core, namespace, "exitcode", "ExitedWithCode")
    assert {
        f"Pod: {namespace}.exitcode-worker-0 exited with code 137",
        f"Pod: {namespace}.exitcode-worker-0 exited with code 1",
    } <= set(exits)


def test_backoff_limit_fails_the_job_and_removes_its_pods(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    body = job_body("backoff", replica(SLEEP), replica(FAIL), runPolicy={"backoffLimit": 2})
    create(custom, namespace, body)

    job = wait_job(custom, namespace, "backoff", is_true("Failed"))

    failed = condition(job, "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "PyTorchJobFailed",
        "Job backoff has failed because it has reached the specified backoff limit",
    )
    wait_for(lambda: not pod_names(core, namespace) and not service_names(core, namespace), what="cleanup")


def test_active_deadline_fails_the_job_and_removes_pods_and_services(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    body = job_body("deadline", replica(SLEEP), replica(SLEEP), runPolicy={"activeDeadlineSeconds": 1})
    create(custom, namespace, body)

    job = wait_job(custom, namespace, "deadline", is_true("Failed"), timeout=20)

    assert sorted(event_messages(core, namespace, "deadline", "SuccessfulCreatePod")) == [
        "Created pod: deadline-master-0",
        "Created pod: deadline-worker-0",
    ]

    failed = condition(job, "Failed")
    assert failed is not None
    assert (failed["reason"], failed["message"]) == (
        "PyTorchJobFailed",
        "Job deadline has failed because it was active longer than specified deadline",
    )
    wait_for(lambda: not pod_names(core, namespace) and not service_names(core, namespace), what="cleanup")


@pytest.mark.parametrize(
    ("policy", "pods_left", "services_left"),
    [
        ("None", ["clean-master-0", "clean-worker-0"], ["clean-master-0", "clean-worker-0"]),
        ("Running", ["clean-master-0"], ["clean-master-0"]),
        ("All", [], []),
    ],
)
def test_clean_pod_policy_after_success(
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    namespace: str,
    policy: str,
    pods_left: list[str],
    services_left: list[str],
) -> None:
    master = replica("import time; time.sleep(1)")
    create(custom, namespace, job_body("clean", master, replica(SLEEP), runPolicy={"cleanPodPolicy": policy}))

    wait_job(custom, namespace, "clean", is_true("Succeeded"))

    wait_for(
        lambda: pod_names(core, namespace) == pods_left and service_names(core, namespace) == services_left,
        what=f"cleanPodPolicy {policy}",
    )
    if policy == "None":  # the Worker outlives the job
        wait_for(lambda: core.read_namespaced_pod("clean-worker-0", namespace).status.phase == "Running")


def test_suspend_and_resume(custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str) -> None:
    body = job_body("pause", replica(SLEEP), replica(SLEEP), runPolicy={"suspend": True})
    create(custom, namespace, body)

    job = wait_job(custom, namespace, "pause", is_true("Suspended"))
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in job["status"]["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated", "PyTorchJob pause is created."),
        ("Suspended", "True", "PyTorchJobSuspended", "PyTorchJob pause is suspended."),
    ]
    assert "startTime" not in job["status"] and pod_names(core, namespace) == []

    patch_spec(custom, namespace, "pause", {"runPolicy": {"suspend": False}})
    _running(custom, core, namespace, "pause")
    job = get(custom, namespace, "pause")
    assert [(c["type"], c["status"], c["reason"]) for c in job["status"]["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Suspended", "False", "PyTorchJobResumed"),
        ("Running", "True", "PyTorchJobRunning"),
    ]
    assert job["status"]["startTime"] and service_names(core, namespace) == [
        "pause-master-0",
        "pause-worker-0",
    ]

    patch_spec(custom, namespace, "pause", {"runPolicy": {"suspend": True}})
    wait_for(lambda: not pod_names(core, namespace) and not service_names(core, namespace), what="suspension")
    job = wait_job(custom, namespace, "pause", is_true("Suspended"))
    assert [(c["type"], c["status"], c["reason"]) for c in job["status"]["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Running", "False", "PyTorchJobSuspended"),
        ("Suspended", "True", "PyTorchJobSuspended"),
    ]
    assert job["status"]["replicaStatuses"]["Master"].get("active", 0) == 0


def test_ttl_deletes_the_finished_job(
    custom: client.CustomObjectsApi, core: client.CoreV1Api, namespace: str
) -> None:
    body = job_body("ttl", replica("pass"), runPolicy={"ttlSecondsAfterFinished": 1})
    create(custom, namespace, body)
    finished = wait_job(custom, namespace, "ttl", is_true("Succeeded"))
    assert finished["status"]["completionTime"]

    def gone() -> bool:
        try:
            get(custom, namespace, "ttl")
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=10, what="TTL deletion")
    wait_for(lambda: not pod_names(core, namespace) and not service_names(core, namespace), what="GC")
    assert event_messages(core, namespace, "ttl", "SuccessfulDeletePod") == ["Deleted job: ttl"]
