"""CronJob admission of the local cluster: upstream defaults and the apiserver's 422 messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.controllers.cronjob.admission import (
    admit_cronjob,
    validate_cronjob,
)
from airflow_k8s_ml.testbed.local_cluster.errors import StatusError


def body(name: str = "nightly", schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [{"name": "c", "image": "busybox"}],
                        }
                    }
                }
            },
            **spec,
        },
        "status": {"lastScheduleTime": "2030-01-01T00:00:00Z"},
    }


def rejection(obj: dict[str, Any], old: dict[str, Any] | None = None) -> str:
    with pytest.raises(StatusError) as caught:
        admit_cronjob(obj, old)
    assert caught.value.code == 422 and caught.value.reason == "Invalid"
    return caught.value.message


def test_defaults_and_status_reset_on_create() -> None:
    admitted = admit_cronjob(body(), None)
    spec = admitted["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    assert admitted["status"] == {}
    assert "backoffLimit" not in spec["jobTemplate"]["spec"]  # the template gets no Job defaults
    kept = admit_cronjob(body(concurrencyPolicy="Forbid", successfulJobsHistoryLimit=0), None)["spec"]
    assert (kept["concurrencyPolicy"], kept["successfulJobsHistoryLimit"]) == ("Forbid", 0)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        (
            "TZ=UTC 0 * * * *",
            'CronJob.batch "nightly" is invalid: spec.schedule: Invalid value: "TZ=UTC 0 * * * *": '
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ),
        (
            "CRON_TZ=Mars/Base 0 * * * *",
            'CronJob.batch "nightly" is invalid: [spec.schedule: Invalid value: '
            '"CRON_TZ=Mars/Base 0 * * * *": provided bad location Mars/Base: unknown time zone Mars/Base, '
            'spec.schedule: Invalid value: "CRON_TZ=Mars/Base 0 * * * *": '
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead]",
        ),
        (
            "0 0 * *",
            'CronJob.batch "nightly" is invalid: spec.schedule: Invalid value: "0 0 * *": '
            "expected exactly 5 fields, found 4: [0 0 * *]",
        ),
        ("", 'CronJob.batch "nightly" is invalid: spec.schedule: Required value'),
    ],
)
def test_schedule_errors(schedule: str, expected: str) -> None:
    assert rejection(body(schedule=schedule)) == expected


@pytest.mark.parametrize(
    "schedule", ["@hourly", "@every 90m", "0 9 ? JAN-DEC MON-FRI", "*/15 0-6,22-23 * * *"]
)
def test_valid_schedules_pass(schedule: str) -> None:
    admit_cronjob(body(schedule=schedule), None)


def test_tz_in_schedule_is_tolerated_on_update_of_a_legacy_object() -> None:
    old = admit_cronjob(body(), None)
    old["spec"]["schedule"] = "TZ=UTC 0 * * * *"  # stored before the rule existed
    updated = copy.deepcopy(old)
    updated["spec"]["suspend"] = True
    admit_cronjob(updated, old)
    updated["spec"]["timeZone"] = "UTC"
    assert rejection(updated, old) == (
        'CronJob.batch "nightly" is invalid: spec.schedule: Invalid value: "TZ=UTC 0 * * * *": '
        "cannot use both timeZone field and TZ or CRON_TZ in schedule"
    )


@pytest.mark.parametrize(
    ("zone", "detail"),
    [
        ("Mars/Base", "unknown time zone Mars/Base"),
        ("../etc/passwd", "unknown time zone ../etc/passwd"),
        ("", "timeZone must be nil or non-empty string"),
        ("Local", "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"),
    ],
)
def test_time_zone_errors(zone: str, detail: str) -> None:
    assert rejection(body(timeZone=zone)) == (
        f'CronJob.batch "nightly" is invalid: spec.timeZone: Invalid value: "{zone}": {detail}'
    )


def test_time_zone_valid_and_unchanged_on_update() -> None:
    old = admit_cronjob(body(timeZone="Europe/Berlin"), None)
    assert old["spec"]["timeZone"] == "Europe/Berlin"
    assert validate_cronjob(old, old) == []


def test_name_limit_applies_on_create_only() -> None:
    name = "a" * 53
    assert rejection(body(name=name)) == (
        f'CronJob.batch "{name}" is invalid: metadata.name: Invalid value: "{name}": '
        "must be no more than 52 characters"
    )
    old = admit_cronjob(body(name="a" * 52), None)
    old["metadata"]["name"] = name  # stored before the limit existed
    assert validate_cronjob(old, old) == []


def test_spec_field_errors() -> None:
    message = rejection(
        body(concurrencyPolicy="Sometimes", startingDeadlineSeconds=-1, failedJobsHistoryLimit=-2)
    )
    assert message == (
        'CronJob.batch "nightly" is invalid: ['
        "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0, "
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": '
        'supported values: "Allow", "Forbid", "Replace", '
        "spec.failedJobsHistoryLimit: Invalid value: -2: must be greater than or equal to 0]"
    )


def test_job_template_is_validated_as_a_job_spec() -> None:
    obj = body()
    pod_spec = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    del pod_spec["restartPolicy"]
    assert rejection(obj) == (
        'CronJob.batch "nightly" is invalid: spec.jobTemplate.spec.template.spec.restartPolicy: '
        'Unsupported value: "Always": supported values: "OnFailure", "Never"'
    )
    obj = body()
    obj["spec"]["jobTemplate"]["spec"].update(
        {"selector": {"matchLabels": {"a": "b"}}, "manualSelector": True}
    )
    message = rejection(obj)
    assert "spec.jobTemplate.spec.selector: Invalid value: " in message
    assert "`selector` will be auto-generated" in message
    assert (
        'spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: "nil", "false"'
        in message
    )


def test_wrong_types_are_a_bad_request() -> None:
    obj = body()
    obj["spec"]["schedule"] = 5
    with pytest.raises(StatusError) as caught:
        admit_cronjob(obj, None)
    assert caught.value.code == 400
    assert "cannot unmarshal number into Go struct field CronJobSpec.spec.schedule of type string" in (
        caught.value.message
    )
