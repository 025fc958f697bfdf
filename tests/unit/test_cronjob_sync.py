"""One CronJob sync (ported from cronjob_controllerv2.go) against an in-memory Job API: the rules that
the integration tests cannot reach cheaply (AlreadyExists adoption, MissingJob, invalid stored specs)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.controllers.cronjob.admission import admit_cronjob
from airflow_k8s_ml.testbed.local_cluster.controllers.cronjob.jobs import (
    history_to_delete,
    job_from_template,
)
from airflow_k8s_ml.testbed.local_cluster.controllers.cronjob.sync import sync
from airflow_k8s_ml.testbed.local_cluster.meta import owner_reference

Obj = dict[str, Any]
CREATED = datetime(2030, 1, 7, 10, 0, 30, tzinfo=UTC)
AT_1005 = datetime(2030, 1, 7, 10, 5, 1, tzinfo=UTC)
MINUTES_1005 = int(datetime(2030, 1, 7, 10, 5, tzinfo=UTC).timestamp()) // 60


class JobApi:
    """The Job API as the sync sees it: a dict of Jobs, with the API's errors."""

    def __init__(self, *jobs: Obj) -> None:
        self.jobs = {j["metadata"]["name"]: copy.deepcopy(j) for j in jobs}
        self.events: list[tuple[str, str, str]] = []

    def event(self, cronjob: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def get_job(self, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.jobs.get(name))

    def create_job(self, job: Obj) -> Obj:
        name = job["metadata"]["name"]
        if name in self.jobs:
            raise errors.already_exists("batch", "jobs", name)
        job = copy.deepcopy(job)
        job["metadata"].update(uid=f"uid-{name}", resourceVersion="7")
        self.jobs[name] = job
        return copy.deepcopy(job)

    def delete_job(self, job: Obj) -> None:
        if self.jobs.pop(job["metadata"]["name"], None) is None:
            raise errors.not_found("batch", "jobs", job["metadata"]["name"])

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]


def cronjob(**spec: Any) -> Obj:
    obj = admit_cronjob(
        {
            "metadata": {"name": "cj", "namespace": "ns"},
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {
                    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}}
                },
                **spec,
            },
        },
        None,
    )
    obj["apiVersion"], obj["kind"] = "batch/v1", "CronJob"
    obj["metadata"].update(uid="cj-uid", creationTimestamp="2030-01-07T10:00:30Z")
    return obj


def child(
    cj: Obj, name: str, *, finished: str | None = None, started: str | None = None, **status: Any
) -> Obj:
    job = job_from_template(cj, CREATED, UTC)
    job["metadata"].update(name=name, uid=f"uid-{name}")
    job["status"] = dict(status)
    if started:
        job["status"]["startTime"] = started
    if finished:
        job["status"]["conditions"] = [{"type": finished, "status": "True"}]
    return job


def run(api: JobApi, cj: Obj, now: datetime = AT_1005) -> float | None:
    return sync(api, cj, [copy.deepcopy(j) for j in api.jobs.values()], now)


def test_creates_the_due_job_and_asks_to_look_again_at_the_next_time() -> None:
    api, cj = JobApi(), cronjob()
    delay = run(api, cj)
    name = f"cj-{MINUTES_1005}"
    assert list(api.jobs) == [name]
    assert cj["status"]["active"] == [
        {
            "kind": "Job",
            "namespace": "ns",
            "name": name,
            "uid": f"uid-{name}",
            "apiVersion": "batch/v1",
            "resourceVersion": "7",
        }
    ]
    assert cj["status"]["lastScheduleTime"] == "2030-01-07T10:05:00Z"
    assert api.events == [("Normal", "SuccessfulCreate", f"Created job {name}")]
    assert delay == 299 + 0.1  # 10:10:00.1 - 10:05:01
    assert run(api, cj) == delay and list(api.jobs) == [name]  # the same time is never run twice


def test_existing_job_of_this_cronjob_is_adopted_without_create_event() -> None:
    cj = cronjob()
    api = JobApi(child(cj, f"cj-{MINUTES_1005}"))  # created by an earlier sync that lost its status write
    api.jobs[f"cj-{MINUTES_1005}"]["status"] = {}
    run(api, cj)
    assert [ref["name"] for ref in cj["status"]["active"]] == [f"cj-{MINUTES_1005}"]
    assert "SuccessfulCreate" not in api.reasons()


def test_existing_job_of_another_owner_stops_the_sync() -> None:
    cj = cronjob()
    foreign = child(cj, f"cj-{MINUTES_1005}")
    foreign["metadata"]["ownerReferences"] = [
        owner_reference({**cj, "metadata": {**cj["metadata"], "uid": "x"}})
    ]
    api = JobApi(foreign)
    assert run(api, cj) is None
    assert "active" not in cj["status"] and "lastScheduleTime" not in cj["status"]


def test_forbid_and_replace() -> None:
    cj = cronjob(concurrencyPolicy="Forbid")
    api = JobApi()
    run(api, cj)
    first = f"cj-{MINUTES_1005}"
    later = datetime(2030, 1, 7, 10, 10, 1, tzinfo=UTC)
    run(api, cj, later)
    assert list(api.jobs) == [first]
    assert api.events[-1] == (
        "Normal",
        "JobAlreadyActive",
        "Not starting job because prior execution is running and concurrency policy is Forbid",
    )
    cj["spec"]["concurrencyPolicy"] = "Replace"
    run(api, cj, later)
    second = f"cj-{MINUTES_1005 + 5}"
    assert list(api.jobs) == [second]
    assert [ref["name"] for ref in cj["status"]["active"]] == [second]
    assert api.events[-2:] == [
        ("Normal", "SuccessfulDelete", f"Deleted job {first}"),
        ("Normal", "SuccessfulCreate", f"Created job {second}"),
    ]


def test_finished_child_leaves_active_and_sets_last_successful_time() -> None:
    api, cj = JobApi(), cronjob()
    run(api, cj)
    name = f"cj-{MINUTES_1005}"
    api.jobs[name]["status"] = {
        "conditions": [{"type": "Complete", "status": "True"}],
        "completionTime": "2030-01-07T10:05:09Z",
    }
    run(api, cj)
    assert "active" not in cj["status"]
    assert cj["status"]["lastSuccessfulTime"] == "2030-01-07T10:05:09Z"
    assert api.events[-1] == ("Normal", "SawCompletedJob", f"Saw completed job: {name}, condition: Complete")


def test_manual_job_is_unexpected_while_running_and_never_active() -> None:
    cj = cronjob(schedule="0 0 1 1 *")
    manual = child(cj, "manual")
    manual["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] = "manual"
    api = JobApi(manual)
    run(api, cj)
    assert api.events == [
        ("Warning", "UnexpectedJob", "Saw a job that the controller did not create or forgot: manual")
    ]
    assert "active" not in cj["status"]


def test_vanished_active_job_is_dropped() -> None:
    api, cj = JobApi(), cronjob(suspend=True)
    cj["status"]["active"] = [{"kind": "Job", "namespace": "ns", "name": "gone", "uid": "u"}]
    assert run(api, cj) is None  # suspended: no requeue, no job
    assert api.events == [("Normal", "MissingJob", "Active job went missing: gone")]
    assert "active" not in cj["status"] and api.jobs == {}


def test_stored_specs_the_controller_cannot_run_are_reported() -> None:
    api = JobApi()
    cj = cronjob(schedule="0 0 31 2 *")  # valid grammar, never fires
    assert run(api, cj) is None
    assert api.events == [
        (
            "Warning",
            "InvalidSchedule",
            "invalid schedule: 0 0 31 2 * : time difference between two schedules is less than 1 second",
        )
    ]
    api, cj = JobApi(), cronjob()
    cj["spec"]["timeZone"] = "Mars/Base"  # cannot pass admission, but the controller checks anyway
    assert run(api, cj) is None
    assert api.events == [
        ("Warning", "UnknownTimeZone", 'invalid timeZone: "Mars/Base": unknown time zone Mars/Base')
    ]


def test_history_keeps_the_newest_and_deletes_never_started_jobs_last() -> None:
    cj = cronjob()
    jobs = [
        child(cj, "b", finished="Complete", started="2030-01-07T10:02:00Z"),
        child(cj, "a", finished="Complete", started="2030-01-07T10:02:00Z"),
        child(cj, "z", finished="Complete"),
        child(cj, "c", finished="Complete", started="2030-01-07T10:01:00Z"),
        child(cj, "f1", finished="Failed", started="2030-01-07T10:01:00Z"),
        child(cj, "f2", finished="Failed", started="2030-01-07T10:03:00Z"),
        child(cj, "running", started="2030-01-07T10:00:00Z"),
    ]
    doomed = [j["metadata"]["name"] for j in history_to_delete(jobs, 1, 1)]
    assert doomed == ["c", "a", "b", "f1"]
    assert history_to_delete(jobs, None, None) == []
