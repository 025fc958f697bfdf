"""The Job controller's sync over a real store and admission, with the test playing the kubelet and a
fake clock: exact status sequences, counters, finalizers, back-off timing, TTL. No server, no processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import LocalCluster
from airflow_k8s_ml.testbed.local_cluster.controllers.job.controller import ORPHAN_POD, JobController
from airflow_k8s_ml.testbed.local_cluster.controllers.job.ttl import TTLAfterFinishedController
from airflow_k8s_ml.testbed.local_cluster.meta import rfc3339
from airflow_k8s_ml.testbed.local_cluster.resources import lookup
from airflow_k8s_ml.testbed.local_cluster.settings import ClusterSettings, FakeClock
from airflow_k8s_ml.testbed.local_cluster.store import Change

JOBS = lookup("batch", "v1", "jobs")
PODS = lookup("", "v1", "pods")
NAMESPACES = lookup("", "v1", "namespaces")
NS = "ns"
FINALIZER = "batch.kubernetes.io/job-tracking"


class Harness:
    """A cluster whose kubelet is the test: pods change phase only when the test says so."""

    def __init__(self, tmp_path: Path) -> None:
        self.clock = FakeClock(start=1_700_000_000.0)
        settings = ClusterSettings(
            state_dir=tmp_path, job_backoff_base=10.0, job_backoff_cap=360.0, clock=self.clock
        )
        self.cluster = LocalCluster(settings)
        self.store = self.cluster.store
        self.jobs = self.cluster.controller("job-controller")
        assert isinstance(self.jobs, JobController)
        self.ttl = self.cluster.controller("ttl-after-finished-controller")
        assert isinstance(self.ttl, TTLAfterFinishedController)
        self.store.create(NAMESPACES, {"metadata": {"name": NS}})
        self.job_statuses: list[dict[str, Any]] = []
        self.store.add_listener(self._record)

    def _record(self, change: Change) -> None:
        if change.storage_key == ("batch", "jobs") and change.type == "MODIFIED":
            self.job_statuses.append(change.obj.get("status") or {})

    def create_job(self, name: str = "pi", restart: str = "Never", **spec: Any) -> dict[str, Any]:
        obj = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "main", "image": "python"}], "restartPolicy": restart}
                },
                **spec,
            },
        }
        return self.store.create(JOBS, self.cluster.admit(JOBS, obj, None))

    def sync(self, name: str = "pi") -> dict[str, Any]:
        asyncio.run(self.jobs.reconcile((NS, name)))
        return self.job(name)

    def job(self, name: str = "pi") -> dict[str, Any]:
        return self.store.get(JOBS, NS, name)

    def pods(self) -> list[dict[str, Any]]:
        return self.store.list(PODS, NS)[0]

    def fresh(self) -> list[dict[str, Any]]:
        """Pods the (test) kubelet has not finished yet."""
        return [p for p in self.pods() if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]

    def run(self, pod: dict[str, Any], ready: bool = False) -> None:
        def edit(p: dict[str, Any]) -> None:
            p["spec"]["nodeName"] = "local-node"
            p["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": str(ready)}],
                "containerStatuses": [{"name": "main", "restartCount": 0, "state": {"running": {}}}],
            }

        self.store.mutate(PODS, NS, pod["metadata"]["name"], edit)

    def finish(self, pod: dict[str, Any], exit_code: int) -> None:
        def edit(p: dict[str, Any]) -> None:
            p["status"] = {
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "containerStatuses": [
                    {
                        "name": "main",
                        "restartCount": 0,
                        "state": {
                            "terminated": {"exitCode": exit_code, "finishedAt": rfc3339(self.clock.now())}
                        },
                    }
                ],
            }

        self.store.mutate(PODS, NS, pod["metadata"]["name"], edit)

    def confirm_deletions(self) -> None:
        """What the kubelet does for deleted pods: stop them and confirm with grace period 0."""
        for pod in self.pods():
            if pod["metadata"].get("deletionTimestamp"):
                self.store.delete(PODS, NS, pod["metadata"]["name"], grace_period=0)


@pytest.fixture()
def h(tmp_path: Path) -> Iterator[Harness]:
    yield Harness(tmp_path)


def condition_types(job: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", "")) for c in job["status"].get("conditions", [])]


def test_success_counts_through_uncounted_and_adds_success_criteria_then_complete(h: Harness) -> None:
    h.create_job()
    job = h.sync()
    [pod] = h.pods()
    assert pod["metadata"]["generateName"] == "pi-" and pod["metadata"]["finalizers"] == [FINALIZER]
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "pi"
    assert job["status"]["active"] == 1 and job["status"]["startTime"] == rfc3339(h.clock.now())
    h.finish(pod, 0)
    h.job_statuses.clear()
    job = h.sync()
    # First write: the pod is uncounted and SuccessCriteriaMet recorded; then counted and Complete.
    first = h.job_statuses[0]
    assert first["uncountedTerminatedPods"] == {"succeeded": [pod["metadata"]["uid"]]}
    assert [c["type"] for c in first["conditions"]] == ["SuccessCriteriaMet"]
    assert condition_types(job) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    assert job["status"]["conditions"][1]["message"] == "Reached expected number of succeeded pods"
    assert job["status"]["succeeded"] == 1 and "active" not in job["status"]
    assert job["status"]["completionTime"] == job["status"]["conditions"][1]["lastTransitionTime"]
    assert job["status"]["uncountedTerminatedPods"] == {} and job["status"]["ready"] == 0
    assert "finalizers" not in h.pods()[0]["metadata"]


def test_never_backoff_limit_with_exponential_replacement_delay(h: Harness) -> None:
    h.create_job(backoffLimit=2)
    h.sync()
    h.finish(h.pods()[0], 1)
    job = h.sync()
    assert job["status"]["failed"] == 1 and len(h.pods()) == 1  # replacement waits 10 s
    h.clock.advance(9)
    h.sync()
    assert len(h.pods()) == 1
    h.clock.advance(1)
    h.sync()
    assert len(h.pods()) == 2
    h.finish(h.fresh()[0], 1)
    h.sync()
    h.clock.advance(19)
    h.sync()
    assert len(h.pods()) == 2  # second replacement waits 20 s
    h.clock.advance(1)
    h.sync()
    assert len(h.pods()) == 3
    h.finish(h.fresh()[0], 1)
    job = h.sync()
    assert job["status"]["failed"] == 3 and len(h.pods()) == 3
    assert condition_types(job) == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert job["status"]["conditions"][1]["message"] == "Job has reached the specified backoff limit"
    assert "completionTime" not in job["status"]
    assert all("finalizers" not in p["metadata"] for p in h.pods())


def test_active_deadline_deletes_and_counts_the_running_pod_then_fails_once_it_stopped(h: Harness) -> None:
    h.create_job(activeDeadlineSeconds=5)
    h.sync()
    [pod] = h.pods()
    h.run(pod)
    h.clock.advance(5)
    job = h.sync()
    assert condition_types(job) == [("FailureTarget", "True", "DeadlineExceeded")]
    assert job["status"]["failed"] == 1 and job["status"]["terminating"] == 1
    assert h.pods()[0]["metadata"].get("deletionTimestamp")
    h.confirm_deletions()
    assert h.pods() == []
    job = h.sync()
    assert condition_types(job)[-1] == ("Failed", "True", "DeadlineExceeded")
    assert job["status"]["conditions"][-1]["message"] == "Job was active longer than specified deadline"
    assert job["status"]["terminating"] == 0 and job["status"]["failed"] == 1


def test_on_failure_restarts_count_against_backoff_limit(h: Harness) -> None:
    h.create_job(restart="OnFailure", backoffLimit=2)
    h.sync()
    [pod] = h.pods()
    h.run(pod)

    def restarted(p: dict[str, Any]) -> None:
        p["status"]["containerStatuses"][0]["restartCount"] = 2

    h.store.mutate(PODS, NS, pod["metadata"]["name"], restarted)
    job = h.sync()
    assert condition_types(job) == [("FailureTarget", "True", "BackoffLimitExceeded")]
    h.confirm_deletions()
    job = h.sync()
    assert condition_types(job)[-1] == ("Failed", "True", "BackoffLimitExceeded")
    assert job["status"]["failed"] == 1


def test_deleted_pod_counts_as_failed_at_once(h: Harness) -> None:
    h.create_job()
    h.sync()
    [pod] = h.pods()
    h.run(pod)
    h.store.delete(PODS, NS, pod["metadata"]["name"])
    job = h.sync()
    assert job["status"]["failed"] == 1 and job["status"]["terminating"] == 1
    deleted = h.store.get(PODS, NS, pod["metadata"]["name"])
    assert "finalizers" not in deleted["metadata"]
    # Its failure time is deletion minus grace period (30 s ago), so the replacement needs no back-off.
    assert len(h.fresh()) == 2 and job["status"]["active"] == 1


def test_parallelism_and_completions(h: Harness) -> None:
    h.create_job(completions=3, parallelism=2)
    job = h.sync()
    assert job["status"]["active"] == 2 and len(h.pods()) == 2
    h.finish(h.pods()[0], 0)
    job = h.sync()
    assert job["status"]["succeeded"] == 1 and job["status"]["active"] == 2 and len(h.pods()) == 3
    for pod in h.fresh():
        h.finish(pod, 0)
    job = h.sync()
    assert job["status"]["succeeded"] == 3 and condition_types(job)[-1][0] == "Complete"


def test_suspend_and_resume(h: Harness) -> None:
    h.create_job(suspend=True)
    job = h.sync()
    assert h.pods() == [] and "startTime" not in job["status"]
    assert condition_types(job) == [("Suspended", "True", "JobSuspended")]
    h.clock.advance(60)

    def resume(j: dict[str, Any]) -> None:
        j["spec"]["suspend"] = False

    h.store.mutate(JOBS, NS, "pi", resume)
    job = h.sync()
    assert condition_types(job) == [("Suspended", "False", "JobResumed")]
    assert job["status"]["startTime"] == rfc3339(h.clock.now()) and len(h.pods()) == 1

    def suspend(j: dict[str, Any]) -> None:
        j["spec"]["suspend"] = True

    h.run(h.pods()[0])
    h.store.mutate(JOBS, NS, "pi", suspend)
    job = h.sync()
    assert "failed" not in job["status"] and "succeeded" not in job["status"]
    assert h.pods()[0]["metadata"].get("deletionTimestamp") and "finalizers" not in h.pods()[0]["metadata"]
    assert condition_types(job) == [("Suspended", "True", "JobSuspended")]


def test_pod_failure_policy_fail_job_and_ignore(h: Harness) -> None:
    policy = {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [7]}},
        ]
    }
    h.create_job(podFailurePolicy=policy, backoffLimit=0)
    h.sync()
    h.finish(h.pods()[0], 7)
    job = h.sync()
    assert "failed" not in job["status"]  # ignored: not counted (but, as upstream, still backs off)
    h.clock.advance(10)
    h.sync()
    assert len(h.pods()) == 2
    [second] = h.fresh()
    h.finish(second, 42)
    job = h.sync()
    message = (
        f"Container main for pod {NS}/{second['metadata']['name']} failed with exit code 42 "
        "matching FailJob rule at index 0"
    )
    assert [(c["type"], c["reason"], c["message"]) for c in job["status"]["conditions"]] == [
        ("FailureTarget", "PodFailurePolicy", message),
        ("Failed", "PodFailurePolicy", message),
    ]
    assert job["status"]["failed"] == 1


def test_indexed_job(h: Harness) -> None:
    h.create_job(completionMode="Indexed", completions=3, parallelism=2)
    h.sync()
    indexes = sorted(
        p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in h.pods()
    )
    assert indexes == ["0", "1"]
    zero = next(
        p for p in h.pods() if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
    )
    assert zero["metadata"]["name"].startswith("pi-0-") and zero["spec"]["hostname"] == "pi-0"
    h.finish(zero, 0)
    job = h.sync()
    assert job["status"]["completedIndexes"] == "0" and job["status"]["succeeded"] == 1
    assert sorted(
        p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in h.pods()
    ) == ["0", "1", "2"]
    for pod in h.fresh():
        h.finish(pod, 0)
    job = h.sync()
    assert job["status"]["completedIndexes"] == "0-2" and condition_types(job)[-1][0] == "Complete"


def test_ttl_deletes_finished_job_foreground_after_ttl(h: Harness) -> None:
    h.create_job(ttlSecondsAfterFinished=30)
    h.sync()
    h.finish(h.pods()[0], 0)
    h.sync()
    asyncio.run(h.ttl.reconcile((NS, "pi")))
    assert h.store.find(JOBS, NS, "pi") is not None
    h.clock.advance(30)
    asyncio.run(h.ttl.reconcile((NS, "pi")))
    job = h.store.find(JOBS, NS, "pi")
    assert job is not None and job["metadata"]["deletionTimestamp"]
    assert job["metadata"]["finalizers"] == ["foregroundDeletion"]


def test_orphaned_pod_loses_its_tracking_finalizer(h: Harness) -> None:
    h.create_job()
    h.sync()
    [pod] = h.pods()
    h.store.delete(JOBS, NS, "pi")  # batch/v1 default propagation: Orphan
    [orphan] = h.pods()
    assert "ownerReferences" not in orphan["metadata"] and orphan["metadata"]["finalizers"] == [FINALIZER]
    asyncio.run(h.jobs.reconcile((ORPHAN_POD, f"{NS}/{pod['metadata']['name']}")))
    assert "finalizers" not in h.pods()[0]["metadata"]


def test_created_pod_events(h: Harness) -> None:
    h.create_job()
    h.sync()
    events = h.store.list(lookup("", "v1", "events"), NS)[0]
    [pod] = h.pods()
    assert [(e["reason"], e["message"], e["source"]["component"]) for e in events] == [
        ("SuccessfulCreate", f"Created pod: {pod['metadata']['name']}", "job-controller")
    ]
