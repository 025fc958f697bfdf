"""batch/v1 CronJob semantics against a local cluster whose clock is a FakeClock, driven by the official
``kubernetes`` client over HTTPS.

The module runs its own cluster (the ``cluster`` fixture is overridden here) so tests can move time: each
test starts at a fresh hour (``hour_start``) and advances the clock past schedule times instead of waiting
for minutes. Jobs the CronJob creates really run under the local job controller and kubelet.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from airflow_k8s_ml.testbed.local_cluster.settings import FakeClock
from tests.cluster_fixtures import fast_settings, python_cmd, wait_for

START = datetime(2030, 1, 7, 0, 0, tzinfo=UTC).timestamp()  # a Monday
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"
RESYNCS = 'local_cluster_controller_resyncs_total{controller="cronjob-controller",state="%s"} '


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock(start=START)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, clock: FakeClock) -> Iterator[ClusterThread]:
    """Overrides the session cluster for this module: same fast settings, but a clock tests can move."""
    state: Path = tmp_path_factory.mktemp("cron-cluster")
    with ClusterThread(fast_settings(state, clock=clock)) as running:
        yield running


# -- helpers -------------------------------------------------------------------------------------------
def hour_start(clock: FakeClock) -> float:
    """Move the clock to the next whole hour (a test's private "H:00:00") and return it."""
    top = math.floor(clock.now() / 3600) * 3600 + 3600
    clock.advance(top - clock.now())
    return top


def move_to(clock: FakeClock, when: float) -> None:
    clock.advance(when - clock.now())


def resyncs(batch: Any, state: str) -> int:
    """The CronJob controller's resync passes so far (``started`` or ``completed``), from ``/metrics``."""
    text = batch.api_client.call_api(
        "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True
    ).data.decode()
    found = [
        line.removeprefix(RESYNCS % state) for line in text.splitlines() if line.startswith(RESYNCS % state)
    ]
    return int(found[0]) if found else 0


def controller_looked(batch: Any) -> None:
    """Wait until the CronJob controller has completed a resync pass that started after this call: every
    CronJob due by the clock as it is now has been synced, and a Job it was going to create exists.

    "Nothing happened" is then the controller's decision, not its slowness: a controller that fires a
    schedule early fails the check however loaded the machine is (a fixed sleep passes it when the early
    Job comes late)."""
    started = resyncs(batch, "started")
    wait_for(
        lambda: resyncs(batch, "completed") > started,
        what=f"a CronJob controller resync pass started after pass {started} to complete",
    )


def minutes(when: float) -> int:
    return int(when) // 60


def stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cronjob_body(name: str, schedule: str, code: str = "print('tick')", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": name}, "annotations": {"team": "ml"}},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 1,
                            "containers": [
                                {"name": "main", "image": "python:3.11", "command": python_cmd(code)}
                            ],
                        }
                    },
                },
            },
            **spec,
        },
    }


def job_names(batch: Any, namespace: str) -> list[str]:
    return sorted(j.metadata.name for j in batch.list_namespaced_job(namespace).items)


def events_of(core: Any, namespace: str, name: str) -> list[tuple[str, str, str]]:
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [(e.type, e.reason, e.message) for e in items]


def finished(batch: Any, namespace: str, name: str) -> Any:
    job = batch.read_namespaced_job(name, namespace)
    done = any(c.type in ("Complete", "Failed") and c.status == "True" for c in job.status.conditions or [])
    return job if done else None


def active_names(batch: Any, namespace: str, name: str) -> list[str]:
    return [ref.name for ref in batch.read_namespaced_cron_job(name, namespace).status.active or []]


# -- scheduling ----------------------------------------------------------------------------------------
def test_first_run_is_the_first_schedule_time_after_creation(
    batch: Any, core: Any, namespace: str, clock: FakeClock
) -> None:
    h = hour_start(clock)
    move_to(clock, h + 30)
    created = batch.create_namespaced_cron_job(namespace, cronjob_body("tick", "*/5 * * * *"))
    spec = created.spec
    assert (spec.concurrency_policy, spec.suspend) == ("Allow", False)
    assert (spec.successful_jobs_history_limit, spec.failed_jobs_history_limit) == (3, 1)
    controller_looked(batch)
    move_to(clock, h + 299)
    controller_looked(batch)
    assert job_names(batch, namespace) == []

    move_to(clock, h + 301)  # the controller looks again 100 ms after each schedule time
    expected = f"tick-{minutes(h + 300)}"
    assert wait_for(lambda: job_names(batch, namespace)) == [expected]
    job = batch.read_namespaced_job(expected, namespace)
    assert job.metadata.annotations == {"team": "ml", SCHEDULED: stamp(h + 300)}
    # Stamped by the cluster's clock: a Job created before its schedule time was created early.
    assert job.metadata.creation_timestamp >= datetime.fromtimestamp(h + 300, UTC)
    assert job.metadata.labels == {"app": "tick"}
    [ref] = job.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid) == (
        "batch/v1",
        "CronJob",
        "tick",
        created.metadata.uid,
    )
    assert (ref.controller, ref.block_owner_deletion) == (True, True)
    assert ("Normal", "SuccessfulCreate", f"Created job {expected}") in events_of(core, namespace, "tick")

    cronjob = wait_for(lambda: (c := batch.read_namespaced_cron_job("tick", namespace)).status.active and c)
    [active] = cronjob.status.active
    assert (active.kind, active.name, active.uid, active.api_version) == (
        "Job",
        expected,
        job.metadata.uid,
        "batch/v1",
    )
    assert cronjob.status.last_schedule_time == datetime.fromtimestamp(h + 300, UTC)

    done = wait_for(lambda: finished(batch, namespace, expected))
    cronjob = wait_for(
        lambda: (c := batch.read_namespaced_cron_job("tick", namespace)).status.last_successful_time and c
    )
    assert cronjob.status.last_successful_time == done.status.completion_time
    assert not cronjob.status.active
    message = f"Saw completed job: {expected}, condition: Complete"
    assert ("Normal", "SawCompletedJob", message) in events_of(core, namespace, "tick")


def test_only_the_most_recent_missed_time_runs(batch: Any, namespace: str, clock: FakeClock) -> None:
    h = hour_start(clock)
    move_to(clock, h + 30)
    batch.create_namespaced_cron_job(namespace, cronjob_body("late", "*/5 * * * *"))
    controller_looked(batch)
    move_to(clock, h + 20 * 60 + 30)  # 10:05, 10:10, 10:15 and 10:20 all passed
    assert wait_for(lambda: job_names(batch, namespace)) == [f"late-{minutes(h + 1200)}"]
    controller_looked(batch)
    assert job_names(batch, namespace) == [f"late-{minutes(h + 1200)}"]
    cronjob = batch.read_namespaced_cron_job("late", namespace)
    assert cronjob.status.last_schedule_time == datetime.fromtimestamp(h + 1200, UTC)


def test_starting_deadline_skips_a_start_that_is_too_late(
    batch: Any, core: Any, namespace: str, clock: FakeClock
) -> None:
    """A start older than startingDeadlineSeconds gets no Job. Upstream's controller searches only the
    deadline window, so its MissSchedule branch never fires (kubernetes#101148): no event either."""
    h = hour_start(clock)
    move_to(clock, h + 30)
    batch.create_namespaced_cron_job(namespace, cronjob_body("dl", "*/5 * * * *", startingDeadlineSeconds=60))
    controller_looked(batch)
    move_to(clock, h + 300 + 90)  # 90 s after 10:05
    controller_looked(batch)
    assert job_names(batch, namespace) == []
    assert batch.read_namespaced_cron_job("dl", namespace).status.last_schedule_time is None
    assert not [e for e in events_of(core, namespace, "dl") if e[1] == "MissSchedule"]

    move_to(clock, h + 600 + 45)  # 45 s after 10:10: within the deadline
    assert wait_for(lambda: job_names(batch, namespace)) == [f"dl-{minutes(h + 600)}"]


def test_suspend_stops_new_jobs_until_resumed(batch: Any, namespace: str, clock: FakeClock) -> None:
    h = hour_start(clock)
    move_to(clock, h + 30)
    batch.create_namespaced_cron_job(namespace, cronjob_body("nap", "*/5 * * * *", suspend=True))
    controller_looked(batch)
    move_to(clock, h + 7 * 60)
    controller_looked(batch)
    assert job_names(batch, namespace) == []
    batch.patch_namespaced_cron_job("nap", namespace, {"spec": {"suspend": False}})
    assert wait_for(lambda: job_names(batch, namespace)) == [f"nap-{minutes(h + 300)}"]


def test_time_zone_moves_the_schedule(batch: Any, namespace: str, clock: FakeClock) -> None:
    """09:00 in Europe/Berlin (CET in January) is 08:00 UTC; without timeZone the controller zone is UTC."""
    h = hour_start(clock)
    day = math.floor(h / 86400) * 86400 + 86400
    move_to(clock, day + 7 * 3600 + 30)
    batch.create_namespaced_cron_job(namespace, cronjob_body("berlin", "0 9 * * *", timeZone="Europe/Berlin"))
    batch.create_namespaced_cron_job(namespace, cronjob_body("utc", "0 9 * * *"))
    controller_looked(batch)
    move_to(clock, day + 8 * 3600 + 1)
    berlin = f"berlin-{minutes(day + 8 * 3600)}"
    assert wait_for(lambda: job_names(batch, namespace)) == [berlin]
    local = datetime.fromtimestamp(day, UTC).strftime("%Y-%m-%d")
    job = batch.read_namespaced_job(berlin, namespace)
    assert job.metadata.annotations[SCHEDULED] == f"{local}T09:00:00+01:00"

    move_to(clock, day + 9 * 3600 + 1)
    utc = f"utc-{minutes(day + 9 * 3600)}"
    assert wait_for(lambda: utc in job_names(batch, namespace))
    assert batch.read_namespaced_job(utc, namespace).metadata.annotations[SCHEDULED] == f"{local}T09:00:00Z"
    assert job_names(batch, namespace) == sorted([berlin, utc])


# -- concurrency policies --------------------------------------------------------------------------------
def test_forbid_skips_while_a_job_is_active(batch: Any, core: Any, namespace: str, clock: FakeClock) -> None:
    h = hour_start(clock)
    move_to(clock, h + 30)
    body = cronjob_body("solo", "*/5 * * * *", "import time; time.sleep(60)", concurrencyPolicy="Forbid")
    batch.create_namespaced_cron_job(namespace, body)
    controller_looked(batch)
    move_to(clock, h + 301)
    first = f"solo-{minutes(h + 300)}"
    assert wait_for(lambda: job_names(batch, namespace)) == [first]
    wait_for(lambda: active_names(batch, namespace, "solo"))
    move_to(clock, h + 601)
    message = "Not starting job because prior execution is running and concurrency policy is Forbid"
    wait_for(lambda: ("Normal", "JobAlreadyActive", message) in events_of(core, namespace, "solo"))
    assert job_names(batch, namespace) == [first]
    assert active_names(batch, namespace, "solo") == [first]


def test_replace_deletes_the_active_job_then_creates(
    batch: Any, core: Any, namespace: str, clock: FakeClock
) -> None:
    h = hour_start(clock)
    move_to(clock, h + 30)
    body = cronjob_body("swap", "*/5 * * * *", "import time; time.sleep(60)", concurrencyPolicy="Replace")
    batch.create_namespaced_cron_job(namespace, body)
    controller_looked(batch)
    move_to(clock, h + 301)
    first, second = f"swap-{minutes(h + 300)}", f"swap-{minutes(h + 600)}"
    assert wait_for(lambda: job_names(batch, namespace)) == [first]
    wait_for(lambda: active_names(batch, namespace, "swap"))
    move_to(clock, h + 601)
    assert wait_for(lambda: (names := job_names(batch, namespace)) == [second] and names)
    assert wait_for(lambda: active_names(batch, namespace, "swap")) == [second]
    recorded = events_of(core, namespace, "swap")
    assert ("Normal", "SuccessfulDelete", f"Deleted job {first}") in recorded
    assert ("Normal", "SuccessfulCreate", f"Created job {second}") in recorded


# -- history and manual runs ---------------------------------------------------------------------------
def test_history_limits_delete_the_oldest_first(
    batch: Any, core: Any, namespace: str, clock: FakeClock
) -> None:
    h = hour_start(clock)
    move_to(clock, h + 30)
    batch.create_namespaced_cron_job(namespace, cronjob_body("ok", "* * * * *", successfulJobsHistoryLimit=2))
    batch.create_namespaced_cron_job(namespace, cronjob_body("bad", "* * * * *", "raise SystemExit(3)"))
    controller_looked(batch)
    runs = [h + 60 * i for i in range(1, 5)]
    for when in runs:
        move_to(clock, when + 1)
        for prefix in ("ok", "bad"):
            name = f"{prefix}-{minutes(when)}"
            wait_for(lambda n=name: n in job_names(batch, namespace))  # type: ignore[misc]
            wait_for(lambda n=name: finished(batch, namespace, n))  # type: ignore[misc]

    keep = [f"ok-{minutes(w)}" for w in runs[-2:]] + [f"bad-{minutes(runs[-1])}"]
    assert wait_for(lambda: (names := job_names(batch, namespace)) == sorted(keep) and names)
    ok_events = events_of(core, namespace, "ok")
    deleted = [m for (_, reason, m) in ok_events if reason == "SuccessfulDelete"]
    assert deleted == [f"Deleted job ok-{minutes(w)}" for w in runs[:2]]
    bad_deleted = [m for (_, reason, m) in events_of(core, namespace, "bad") if reason == "SuccessfulDelete"]
    assert sorted(bad_deleted) == sorted(f"Deleted job bad-{minutes(w)}" for w in runs[:3])
    saw_failed = f"Saw completed job: bad-{minutes(runs[-1])}, condition: Failed"
    assert ("Normal", "SawCompletedJob", saw_failed) in events_of(core, namespace, "bad")


def test_manual_job_from_the_template_is_tracked_like_upstream(
    batch: Any, core: Any, namespace: str, clock: FakeClock
) -> None:
    """What ``kubectl create job --from=cronjob/x`` sends. Upstream counts it as the CronJob's child
    (history, lastSuccessfulTime) but never puts it in ``status.active`` (it warns UnexpectedJob)."""
    cronjob = batch.create_namespaced_cron_job(
        namespace, cronjob_body("nightly", "0 0 1 1 *", "import time; time.sleep(0.5)")
    )
    template = batch.api_client.sanitize_for_serialization(cronjob.spec.job_template)
    manual = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nightly-manual",
            "labels": template["metadata"]["labels"],
            "annotations": {
                "cronjob.kubernetes.io/instantiate": "manual",
                **template["metadata"]["annotations"],
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": "nightly",
                    "uid": cronjob.metadata.uid,
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }
    batch.create_namespaced_job(namespace, manual)
    unexpected = "Saw a job that the controller did not create or forgot: nightly-manual"
    wait_for(lambda: ("Warning", "UnexpectedJob", unexpected) in events_of(core, namespace, "nightly"))
    assert active_names(batch, namespace, "nightly") == []

    done = wait_for(lambda: finished(batch, namespace, "nightly-manual"), timeout=30)
    assert done.status.succeeded == 1
    status = wait_for(
        lambda: (s := batch.read_namespaced_cron_job("nightly", namespace).status).last_successful_time and s
    )
    assert status.last_successful_time == done.status.completion_time
    assert not status.active and status.last_schedule_time is None

    batch.delete_namespaced_cron_job("nightly", namespace)  # Background: the garbage collector takes the Job
    wait_for(lambda: job_names(batch, namespace) == [] or None)


# -- admission ---------------------------------------------------------------------------------------------
def invalid_message(batch: Any, namespace: str, body: dict[str, Any]) -> str:
    import json

    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_cron_job(namespace, body)
    assert caught.value.status == 422
    status = json.loads(caught.value.body)
    assert (status["reason"], status["details"]["kind"], status["details"]["group"]) == (
        "Invalid",
        "CronJob",
        "batch",
    )
    return str(status["message"])


def test_schedule_with_tz_is_rejected_with_the_apiserver_message(batch: Any, namespace: str) -> None:
    message = invalid_message(batch, namespace, cronjob_body("tz", "TZ=UTC 0 * * * *"))
    assert message == (
        'CronJob.batch "tz" is invalid: spec.schedule: Invalid value: "TZ=UTC 0 * * * *": '
        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    )


def test_unknown_time_zone_and_bad_schedule_are_422(batch: Any, namespace: str) -> None:
    message = invalid_message(batch, namespace, cronjob_body("mars", "0 * * * *", timeZone="Mars/Base"))
    assert message == (
        'CronJob.batch "mars" is invalid: spec.timeZone: Invalid value: "Mars/Base": '
        "unknown time zone Mars/Base"
    )
    message = invalid_message(batch, namespace, cronjob_body("sixty", "60 * * * *"))
    assert message == (
        'CronJob.batch "sixty" is invalid: spec.schedule: Invalid value: "60 * * * *": '
        "end of range (60) above maximum (59): 60"
    )


def test_name_longer_than_52_characters_is_rejected(batch: Any, namespace: str) -> None:
    for name in ("n" * 53, "n" * 70):  # a subdomain name (not a label): only the 52-character rule applies
        message = invalid_message(batch, namespace, cronjob_body(name, "@hourly"))
        assert message == (
            f'CronJob.batch "{name}" is invalid: metadata.name: Invalid value: "{name}": '
            "must be no more than 52 characters"
        )
    assert batch.create_namespaced_cron_job(namespace, cronjob_body("nightly.v2", "@hourly")).metadata.name
    assert (
        batch.create_namespaced_cron_job(namespace, cronjob_body("n" * 52, "@hourly")).metadata.name
        == "n" * 52
    )
