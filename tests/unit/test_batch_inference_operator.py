"""BatchInferenceCronJobOperator without a cluster: validation at parse time and the rendered CronJob."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.cron import TZ_IN_SCHEDULE_MESSAGE
from airflow_k8s_ml.manifests.naming import RunKey
from airflow_k8s_ml.operators.batch_inference import BatchInferenceCronJobOperator

BASE: dict[str, Any] = {
    "task_id": "batch",
    "name": "digits-nightly",
    "schedule": "30 2 * * *",
    "model_uri": {"uri": "file:///m/step-3/", "step": 3},
    "input_uri": "file:///data/in/",
    "output_uri": "file:///data/out/",
    "image": "py:3",
    "command": ["python", "-m", "airflow_k8s_ml.workloads.batch_predict"],
}


def _operator(**overrides: Any) -> BatchInferenceCronJobOperator:
    return BatchInferenceCronJobOperator(**{**BASE, **overrides})


def test_tz_in_the_schedule_gets_the_api_servers_words() -> None:
    with pytest.raises(ValidationError) as info:
        _operator(schedule="TZ=Europe/Berlin 30 2 * * *")
    assert info.value.field == "schedule"
    assert info.value.message == TZ_IN_SCHEDULE_MESSAGE
    assert TZ_IN_SCHEDULE_MESSAGE == "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"time_zone": "Mars/Olympus"}, "time_zone", "unknown time zone Mars/Olympus"),
        ({"schedule": "61 * * * *"}, "schedule", "end of range (61) above maximum (59): 61"),
        ({"schedule": "* * * *"}, "schedule", "expected exactly 5 fields, found 4: [* * * *]"),
        ({"concurrency_policy": "Never"}, "concurrency_policy", None),
        ({"name": "x" * 53}, "name", None),
        ({"starting_deadline_seconds": -1}, "starting_deadline_seconds", None),
        ({"run_now": "yes"}, "run_now", None),
        ({"run_timeout": 0}, "run_timeout", None),
        ({"pod_options": {"restart_policy": "Never"}}, "pod_options.restart_policy", None),
    ],
)
def test_bad_arguments_name_the_field(overrides: dict[str, Any], field: str, message: str | None) -> None:
    with pytest.raises(ValidationError) as info:
        _operator(**overrides)
    assert info.value.field == field
    if message is not None:
        assert info.value.message == message


def test_templated_schedule_and_zone_wait_for_rendering() -> None:
    op = _operator(schedule="{{ params.schedule }}", time_zone="{{ params.tz }}", name="{{ params.name }}")
    assert op.schedule == "{{ params.schedule }}"


def test_rendered_cronjob() -> None:
    op = _operator(time_zone="Europe/Berlin", suspend=True, successful_jobs_history_limit=5, backoff_limit=1)
    key = RunKey("nightly", "batch", "manual__2024-06-01T00:00:00+00:00", attempt=2)
    cronjob = op._check(op._arguments(), key, "ml")
    spec = cronjob["spec"]
    assert spec["schedule"] == "30 2 * * *" and spec["timeZone"] == "Europe/Berlin"
    assert spec["concurrencyPolicy"] == "Forbid" and spec["suspend"] is True
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (5, 1)
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 1
    container = job["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "MODEL_URI": "file:///m/step-3/",
        "INPUT_URI": "file:///data/in/",
        "OUTPUT_URI": "file:///data/out/",
    }
    # The run identity labels the CronJob, never its job template (scheduled Jobs are not this run's).
    assert cronjob["metadata"]["labels"]["airflow-k8s-ml/task-id"] == "batch"
    assert "airflow-k8s-ml/attempt" not in cronjob["metadata"]["labels"]
    assert not any(k.startswith("airflow-k8s-ml/run") for k in job["template"]["metadata"]["labels"])


def test_env_from_loads_secrets_like_the_other_operators() -> None:
    from airflow.exceptions import AirflowProviderDeprecationWarning

    key = RunKey("nightly", "batch", "manual__2024-06-01T00:00:00+00:00")
    op = _operator(env_from=["s3-credentials"])
    cronjob = op._check(op._arguments(), key, "ml")
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    with pytest.warns(AirflowProviderDeprecationWarning):
        assert _operator(env_from_secrets=["s3-credentials"]).env_from == ["s3-credentials"]
    with pytest.raises(ValidationError) as info:
        _operator(env_from=["Bad_Name"])
    assert info.value.field == "env_from[0]"


def test_typed_arguments_cover_every_cronjob_argument_and_the_pod() -> None:
    """The frozen arguments value is read from the operator's own attributes: each CronJob field the spec
    takes is one of its fields, and the pod arguments travel in ``pod``."""
    from airflow_k8s_ml.operators._serving import CRONJOB_ARGUMENTS, POD_ARGUMENTS, CronJobArgs

    assert set(CRONJOB_ARGUMENTS) <= set(CronJobArgs._fields)
    args = _operator(env_from=["s3-credentials"])._arguments()
    assert set(args.pod) == {*POD_ARGUMENTS, "pod_options"} and args.pod["env_from"] == ["s3-credentials"]
    with pytest.raises(AttributeError):
        args.schedule = "@hourly"  # type: ignore[misc]
