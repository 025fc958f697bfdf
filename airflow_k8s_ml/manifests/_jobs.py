"""batch/v1 JobSpec pieces shared by fine-tune Jobs, batch-inference Jobs and CronJob job templates."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests.validation import (
    check_choice,
    check_int,
    check_mapping,
    check_optional_int,
    fail,
)

#: ``Always`` is not allowed for Job pods (the Job could never finish).
JOB_RESTART_POLICIES = ("Never", "OnFailure")
_INT32_MAX = 2**31 - 1


def check_job_options(
    *,
    restart_policy: Any,
    backoff_limit: Any,
    active_deadline_seconds: Any,
    ttl_seconds_after_finished: Any,
    pod_failure_policy: Any = None,
) -> None:
    """The checks the API server applies to these JobSpec fields, with our argument names."""
    check_choice(restart_policy, JOB_RESTART_POLICIES, "restart_policy")
    check_optional_int(backoff_limit, "backoff_limit", minimum=0, maximum=_INT32_MAX)
    check_optional_int(active_deadline_seconds, "active_deadline_seconds", minimum=1)
    check_optional_int(
        ttl_seconds_after_finished, "ttl_seconds_after_finished", minimum=0, maximum=_INT32_MAX
    )
    if pod_failure_policy is not None:
        policy = check_mapping(pod_failure_policy, "pod_failure_policy")
        rules = policy.get("rules")
        if not isinstance(rules, list) or not rules:
            raise fail("pod_failure_policy.rules", "must be a non-empty list of rules")
        if restart_policy != "Never":
            raise fail(
                "pod_failure_policy", 'requires restart_policy "Never" (the API server rejects it otherwise)'
            )


def job_spec(
    *,
    template: dict[str, Any],
    backoff_limit: int | None,
    active_deadline_seconds: int | None,
    ttl_seconds_after_finished: int | None,
    suspend: bool = False,
    parallelism: int | None = None,
    completions: int | None = None,
    pod_failure_policy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A JobSpec dict; optional fields are left out so the API server's defaults apply."""
    spec: dict[str, Any] = {}
    if parallelism is not None:
        spec["parallelism"] = check_int(parallelism, "parallelism", minimum=0)
    if completions is not None:
        spec["completions"] = check_int(completions, "completions", minimum=1)
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    if ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    if suspend:
        spec["suspend"] = True
    if pod_failure_policy is not None:
        spec["podFailurePolicy"] = copy.deepcopy(dict(pod_failure_policy))
    spec["template"] = template
    return spec
