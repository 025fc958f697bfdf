"""Create/update admission for batch/v1 CronJobs: ``SetDefaults_CronJob`` and the apiserver's
``ValidateCronJobCreate``/``ValidateCronJobUpdate`` with their field paths and messages.

The 422 messages are what users see from ``kubectl apply`` and what our operators surface, so schedule
errors quote robfig's parser exactly (see :mod:`airflow_k8s_ml.k8s.cron`), and the job template is checked by
the same rules as a Job's spec (:func:`..job.validation.validate_job_spec`) under ``spec.jobTemplate.spec``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.k8s.cron import TZ_IN_SCHEDULE_MESSAGE, ScheduleError, parse_standard, time_zone_error

from ... import errors
from ...store import Obj
from ..job.validation import (
    Cause,
    go_label_selector,
    go_value,
    invalid,
    nonnegative,
    not_supported,
    required,
    validate_job_spec,
)

CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
MAX_NAME_LENGTH = 52  # 63 (a Job name) minus the controller's "-<minutes since epoch>" suffix
TZ_AND_TIME_ZONE = "cannot use both timeZone field and TZ or CRON_TZ in schedule"


def set_defaults(cronjob: Obj) -> None:
    """``SetDefaults_CronJob`` (pkg/apis/batch/v1/defaults.go); the job template gets no Job defaults."""
    spec = cronjob.setdefault("spec", {})
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("successfulJobsHistoryLimit") is None:
        spec["successfulJobsHistoryLimit"] = 3
    if spec.get("failedJobsHistoryLimit") is None:
        spec["failedJobsHistoryLimit"] = 1


def admit_cronjob(obj: Obj, old: Obj | None) -> Obj:
    """The cluster's admission hook for cronjobs: the object to store, or 400/422 like the apiserver."""
    cronjob = copy.deepcopy(obj)
    _check_types(cronjob)
    set_defaults(cronjob)
    if old is None:
        cronjob["status"] = {}  # PrepareForCreate drops any status the client sent
    causes = validate_cronjob(cronjob, old)
    if causes:
        name = (cronjob.get("metadata") or {}).get("name", "")
        raise errors.invalid("CronJob", "batch", "cronjobs", name, causes)
    return cronjob


def _check_types(cronjob: Obj) -> None:
    """What Go's JSON decoding refuses before validation runs (400, not 422)."""
    spec = cronjob.get("spec") or {}
    for field in ("schedule", "timeZone"):
        value = spec.get(field)
        if value is not None and not isinstance(value, str):
            raise errors.bad_request(
                f'CronJob in version "v1" cannot be handled as a CronJob: json: cannot unmarshal '
                f"{_json_type(value)} into Go struct field CronJobSpec.spec.{field} of type string"
            )


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


def validate_cronjob(cronjob: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """``ValidateCronJobCreate`` (old None) or ``ValidateCronJobUpdate``, in upstream's order."""
    spec = cronjob.get("spec") or {}
    old_spec = (old.get("spec") or {}) if old is not None else None
    causes = validate_spec(spec, old_spec)
    name = (cronjob.get("metadata") or {}).get("name") or ""
    if old is None and len(name) > MAX_NAME_LENGTH:  # skipped on update so old long names stay editable
        detail = f"must be no more than {MAX_NAME_LENGTH} characters"
        causes.append(invalid("metadata.name", go_value(name), detail))
    return causes


def validate_spec(spec: Mapping[str, Any], old_spec: Mapping[str, Any] | None) -> list[Cause]:
    """``validateCronJobSpec``."""
    causes: list[Cause] = []
    schedule = spec.get("schedule") or ""
    if not schedule:
        causes.append(required("spec.schedule"))
    else:
        allow_tz = old_spec is not None and "TZ" in (old_spec.get("schedule") or "")
        causes += validate_schedule_format(schedule, allow_tz, spec.get("timeZone"))
    causes += nonnegative("spec.startingDeadlineSeconds", spec.get("startingDeadlineSeconds"))
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        causes += validate_time_zone(spec.get("timeZone"))
    causes += _validate_concurrency_policy(spec.get("concurrencyPolicy") or "")
    causes += validate_job_template(spec.get("jobTemplate") or {})
    for field in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        causes += nonnegative(f"spec.{field}", spec.get(field))
    return causes


def validate_schedule_format(schedule: str, allow_tz: bool, time_zone: str | None) -> list[Cause]:
    """``validateScheduleFormat``: robfig must parse it, and a TZ inside it is refused unless the old
    object already had one (then only together with ``timeZone``)."""
    causes: list[Cause] = []
    value = go_value(schedule)
    try:
        parse_standard(schedule)
    except ScheduleError as exc:
        causes.append(invalid("spec.schedule", value, str(exc)))
    if allow_tz and "TZ" in schedule and time_zone is not None:
        causes.append(invalid("spec.schedule", value, TZ_AND_TIME_ZONE))
    elif not allow_tz and "TZ" in schedule:
        causes.append(invalid("spec.schedule", value, TZ_IN_SCHEDULE_MESSAGE))
    return causes


def validate_time_zone(time_zone: str | None) -> list[Cause]:
    """``validateTimeZone``: nil, or an explicit IANA zone that loads."""
    problem = time_zone_error(time_zone) if time_zone is not None else None
    return [] if problem is None else [invalid("spec.timeZone", go_value(time_zone), problem)]


def _validate_concurrency_policy(policy: str) -> list[Cause]:
    if policy in CONCURRENCY_POLICIES:
        return []
    if not policy:
        return [required("spec.concurrencyPolicy")]
    return [not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES)]


def validate_job_template(template: Mapping[str, Any]) -> list[Cause]:
    """``ValidateJobTemplateSpec``: a Job spec without a selector (the Job's admission generates it)."""
    spec = template.get("spec") or {}
    causes = [
        ("spec.jobTemplate." + field, reason, message)
        for field, reason, message in validate_job_spec(spec)
        if not (field == "spec.selector" and reason == "FieldValueRequired")
    ]
    if spec.get("selector") is not None:
        causes.append(
            invalid(
                "spec.jobTemplate.spec.selector",
                go_label_selector(spec["selector"]),
                "`selector` will be auto-generated",
            )
        )
    if spec.get("manualSelector"):
        causes.append(not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"]))
    return causes


__all__ = ["admit_cronjob", "set_defaults", "validate_cronjob"]
