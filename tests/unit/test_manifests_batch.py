from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.batch import (
    CRONJOB_LABEL,
    INSTANTIATE_ANNOTATION,
    BatchInferenceSpec,
    build_batch_job,
    build_cronjob,
    job_from_cronjob,
)
from airflow_k8s_ml.manifests.cron import (
    TZ_IN_SCHEDULE_MESSAGE,
    next_schedule_time,
    parse_schedule,
    validate_schedule,
    validate_time_zone,
)
from airflow_k8s_ml.manifests.naming import RunKey, manual_job_name
from airflow_k8s_ml.manifests.pod import PodTemplate

POD = PodTemplate(image="ghcr.io/acme/predict:1", command=["python", "-m", "predict"])
KEY = RunKey("batch_dag", "predict", "scheduled__2024-01-01T00:00:00+00:00")


def spec(**overrides):
    kwargs = {
        "pod": POD,
        "model_uri": "s3://models/m/step-10",
        "input_uri": "s3://data/in/",
        "output_uri": "s3://data/out/",
        "schedule": "0 2 * * *",
        "time_zone": "Europe/Berlin",
    }
    kwargs.update(overrides)
    return BatchInferenceSpec(**kwargs)


def roundtrip(obj, model):
    from kubernetes.client import ApiClient

    client = ApiClient()
    return client.sanitize_for_serialization(client._ApiClient__deserialize(obj, model))


# --- schedules -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        "0 * * * *",
        "*/5 * * * *",
        "0 0 * * MON-FRI",
        "0 0 * * mon-fri",
        "0 0 ? * *",
        "15 3 1,15 * *",
        "0 0 1 JAN,jul *",
        "5/15 * * * *",
        "0-30/10 9-17 * * 1-5",
        "  0   2  *  *  *  ",
        "0 0 31 2 *",
        "0 0 * * sun",
        "+5 * * * *",
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "@every 1h30m",
        "@every 500ms",
    ],
)
def test_valid_schedules(schedule):
    validate_schedule(schedule, None)
    parse_schedule(schedule)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 1 1 * 2020", "expected exactly 5 fields, found 6: [0 0 1 1 * 2020]"),
        ("0 * * * * *", "expected exactly 5 fields, found 6"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("0 24 * * *", "end of range (24) above maximum (23): 24"),
        ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("0 0 * 13 *", "end of range (13) above maximum (12): 13"),
        ("0 0 * * 7", "end of range (7) above maximum (6): 7"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("0 0 L * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
        ("0 0 * * 1#2", "failed to parse int from 1#2"),
        ("0 0 * * MON-FRX", "failed to parse int from FRX"),
        ("H * * * *", "failed to parse int from H"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@daily ", "unrecognized descriptor: @daily "),
        ("@every 1x", 'failed to parse duration @every 1x: time: unknown unit "x" in duration "1x"'),
        ("TZ=UTC 0 * * * *", TZ_IN_SCHEDULE_MESSAGE),
        ("CRON_TZ=Europe/Berlin 0 0 * * *", TZ_IN_SCHEDULE_MESSAGE),
        (None, "must be a string"),
    ],
)
def test_invalid_schedules_give_the_api_servers_message(schedule, message):
    with pytest.raises(ValidationError) as info:
        validate_schedule(schedule, None)
    assert info.value.field == "schedule"
    assert message in info.value.message


def test_tz_message_is_exactly_the_api_servers():
    with pytest.raises(ValidationError) as info:
        validate_schedule("TZ=UTC 0 * * * *", "UTC")
    assert info.value.message == "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
    assert str(info.value) == "schedule: cannot use TZ or CRON_TZ in schedule, use timeZone field instead"


@pytest.mark.parametrize(
    "zone", ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", None]
)
def test_valid_time_zones(zone):
    assert validate_time_zone(zone) == zone


@pytest.mark.parametrize(
    ("zone", "message"),
    [
        ("", "timeZone must be nil or non-empty string"),
        ("Local", "timeZone must be an explicit time zone"),
        ("Mars/Olympus", "unknown time zone Mars/Olympus"),
        ("../etc/passwd", "unknown time zone"),
        ("Europe/Berlin ", "unknown time zone"),
        (5, "must be a string"),
    ],
)
def test_invalid_time_zones(zone, message):
    with pytest.raises(ValidationError) as info:
        validate_schedule("0 * * * *", zone)
    assert info.value.field == "time_zone"
    assert message in info.value.message


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "zone", "after", "expected"),
    [
        ("0 2 * * *", "Europe/Berlin", utc(2024, 6, 30, 23, 0), utc(2024, 7, 1, 0, 0)),  # CEST = UTC+2
        ("0 2 * * *", "Europe/Berlin", utc(2024, 1, 10, 0, 0), utc(2024, 1, 10, 1, 0)),  # CET = UTC+1
        ("0 2 * * *", None, utc(2024, 1, 10, 0, 0), utc(2024, 1, 10, 2, 0)),
        ("0 0 1 * 1", None, utc(2024, 9, 3, 0, 0), utc(2024, 9, 9, 0, 0)),  # dom OR dow (both restricted)
        ("0 0 1 * *", None, utc(2024, 9, 3, 0, 0), utc(2024, 10, 1, 0, 0)),
        ("0 0 ? * 1", None, utc(2024, 9, 3, 0, 0), utc(2024, 9, 9, 0, 0)),  # '?' is a star: dow only
        ("*/15 * * * *", None, utc(2024, 1, 1, 0, 7), utc(2024, 1, 1, 0, 15)),
        ("5/20 * * * *", None, utc(2024, 1, 1, 0, 26), utc(2024, 1, 1, 0, 45)),  # "N/step" means N-max/step
        ("@weekly", None, utc(2024, 9, 3, 0, 0), utc(2024, 9, 8, 0, 0)),
        ("@every 90m", None, utc(2024, 1, 1, 0, 0), utc(2024, 1, 1, 1, 30)),
        ("0 0 31 2 *", None, utc(2024, 1, 1, 0, 0), None),
    ],
)
def test_next_schedule_time(schedule, zone, after, expected):
    assert next_schedule_time(schedule, zone, after) == expected


def test_next_schedule_time_needs_aware_datetime():
    with pytest.raises(ValidationError):
        next_schedule_time("0 * * * *", None, datetime(2024, 1, 1))


def test_every_rounds_like_robfig():
    assert parse_schedule("@every 500ms").every == timedelta(seconds=1)
    assert parse_schedule("@every 1.5s").every == timedelta(seconds=1)


# --- CronJob ---------------------------------------------------------------------------------------------


def test_build_cronjob():
    cj = build_cronjob(
        spec(starting_deadline_seconds=300), "nightly-predict", "ml", KEY.labels(), KEY.annotations()
    )
    assert cj["apiVersion"] == "batch/v1" and cj["kind"] == "CronJob"
    assert cj["metadata"]["labels"] == KEY.labels()
    body = cj["spec"]
    assert body["schedule"] == "0 2 * * *"
    assert body["timeZone"] == "Europe/Berlin"
    assert body["concurrencyPolicy"] == "Forbid"
    assert body["startingDeadlineSeconds"] == 300
    assert body["successfulJobsHistoryLimit"] == 3 and body["failedJobsHistoryLimit"] == 1
    assert body["suspend"] is False
    template = body["jobTemplate"]
    stable = {"app.kubernetes.io/managed-by": "airflow-k8s-ml", CRONJOB_LABEL: "nightly-predict"}
    # no run identity in the template: scheduled Jobs must not look like a DAG run's workload
    assert template["metadata"]["labels"] == stable
    assert template["spec"]["template"]["metadata"]["labels"] == stable
    assert template["spec"]["backoffLimit"] == 2
    pod = template["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["env"] == [
        {"name": "MODEL_URI", "value": "s3://models/m/step-10"},
        {"name": "INPUT_URI", "value": "s3://data/in/"},
        {"name": "OUTPUT_URI", "value": "s3://data/out/"},
    ]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert roundtrip(cj, "V1CronJob") == cj


def test_build_batch_job_is_the_same_work_once():
    job = build_batch_job(spec(schedule=None, time_zone=None), KEY.workload_name(), "ml", KEY.labels())
    assert job["kind"] == "Job"
    assert job["spec"]["template"]["metadata"]["labels"] == KEY.labels()
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][0] == {
        "name": "MODEL_URI",
        "value": "s3://models/m/step-10",
    }
    assert roundtrip(job, "V1Job") == job


def test_cronjob_requires_schedule_and_short_name():
    with pytest.raises(ValidationError) as info:
        build_cronjob(spec(schedule=None), "x", "ml")
    assert info.value.field == "schedule"
    with pytest.raises(ValidationError) as info:
        build_cronjob(spec(), "c" * 53, "ml")
    assert info.value.field == "name"
    build_cronjob(spec(), "c" * 52, "ml")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"schedule": "TZ=UTC 0 * * * *"}, "schedule"),
        ({"schedule": "61 * * * *"}, "schedule"),
        ({"time_zone": "Mars/Base"}, "time_zone"),
        ({"model_uri": ""}, "model_uri"),
        ({"input_uri": None}, "input_uri"),
        ({"output_uri": " "}, "output_uri"),
        ({"concurrency_policy": "Sometimes"}, "concurrency_policy"),
        ({"starting_deadline_seconds": -1}, "starting_deadline_seconds"),
        ({"successful_jobs_history_limit": -1}, "successful_jobs_history_limit"),
        ({"failed_jobs_history_limit": "1"}, "failed_jobs_history_limit"),
        ({"suspend": "no"}, "suspend"),
        ({"backoff_limit": -1}, "backoff_limit"),
        ({"restart_policy": "Always"}, "restart_policy"),
        ({"active_deadline_seconds": -10}, "active_deadline_seconds"),
        ({"pod": "image"}, "pod"),
    ],
)
def test_batch_spec_errors(kwargs, field):
    with pytest.raises(ValidationError) as info:
        spec(**kwargs)
    assert info.value.field == field, str(info.value)


def test_user_env_may_not_shadow_injected_uris():
    bad = spec(pod=PodTemplate(image="x", env={"OUTPUT_URI": "s3://elsewhere"}))
    with pytest.raises(ValidationError) as info:
        build_cronjob(bad, "c", "ml")
    assert info.value.field == "env[OUTPUT_URI]"


# --- run now: Job from CronJob ---------------------------------------------------------------------------


def server_cronjob():
    cj = build_cronjob(spec(), "nightly-predict", "ml", KEY.labels(), KEY.annotations())
    cj["spec"]["jobTemplate"]["metadata"]["annotations"] = {"team": "ml"}
    cj["metadata"].update(uid="3f1c2a4e-0000-4000-8000-000000000001", resourceVersion="42", generation=1)
    cj["status"] = {"lastScheduleTime": "2024-01-01T01:00:00Z"}
    return cj


def test_job_from_cronjob_matches_kubectl_create_job_from():
    cj = server_cronjob()
    before = copy.deepcopy(cj)
    job = job_from_cronjob(cj, "nightly-predict-manual-1")
    assert cj == before  # input not mutated
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    meta = job["metadata"]
    assert meta["name"] == "nightly-predict-manual-1"
    assert meta["namespace"] == "ml"
    assert meta["annotations"] == {INSTANTIATE_ANNOTATION: "manual", "team": "ml"}
    assert meta["labels"] == cj["spec"]["jobTemplate"]["metadata"]["labels"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "nightly-predict",
            "uid": "3f1c2a4e-0000-4000-8000-000000000001",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"] == cj["spec"]["jobTemplate"]["spec"]
    assert job["spec"] is not cj["spec"]["jobTemplate"]["spec"]
    assert roundtrip(job, "V1Job") == job


def test_job_from_cronjob_with_run_labels_and_kubectl_owner():
    name = manual_job_name("nightly-predict", KEY)
    job = job_from_cronjob(
        server_cronjob(), name, labels=KEY.labels(), annotations=KEY.annotations(), block_owner_deletion=False
    )
    assert job["metadata"]["labels"][CRONJOB_LABEL] == "nightly-predict"
    assert job["metadata"]["labels"]["airflow-k8s-ml/run-id"] == KEY.labels()["airflow-k8s-ml/run-id"]
    assert job["spec"]["template"]["metadata"]["labels"]["airflow-k8s-ml/attempt"] == "1"
    assert job["metadata"]["annotations"][INSTANTIATE_ANNOTATION] == "manual"
    assert "blockOwnerDeletion" not in job["metadata"]["ownerReferences"][0]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda cj: cj["metadata"].pop("uid"), "cronjob"),
        (lambda cj: cj.update(kind="Job"), "cronjob"),
        (lambda cj: cj["spec"]["jobTemplate"].pop("spec"), "cronjob"),
    ],
)
def test_job_from_cronjob_errors(mutate, field):
    cj = server_cronjob()
    mutate(cj)
    with pytest.raises(ValidationError) as info:
        job_from_cronjob(cj, "x")
    assert info.value.field == field


def test_job_from_cronjob_validates_job_name():
    with pytest.raises(ValidationError) as info:
        job_from_cronjob(server_cronjob(), "Bad_Name")
    assert info.value.field == "job_name"
