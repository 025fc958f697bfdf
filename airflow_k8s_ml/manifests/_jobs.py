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

#: The pod failure policy rule a training Job carries: a pod with the condition ``DisruptionTarget`` (evicted
#: through the Eviction API, preempted by the scheduler, killed by the kubelet under node pressure or at a
#: graceful node shutdown, removed by the taint manager) is not a failure of the training, so it does not
#: count towards ``backoffLimit`` and the Job replaces the pod at once (upstream's documented example).
DISRUPTION_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}

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


def with_disruption_rule(policy: Mapping[str, Any] | None, restart_policy: str) -> dict[str, Any] | None:
    """``policy`` with :data:`DISRUPTION_RULE` first, unless one of its rules already decides on
    ``DisruptionTarget`` (the user's word wins). None with ``restart_policy`` "OnFailure": the API server
    accepts a pod failure policy only with "Never" (containers then restart in place, which a disruption
    of the whole pod does not reach anyway)."""
    if restart_policy != "Never":
        return dict(policy) if policy is not None else None
    rules = list((policy or {}).get("rules") or [])
    decided = any(
        condition.get("type") == "DisruptionTarget"
        for rule in rules
        if isinstance(rule, Mapping)
        for condition in rule.get("onPodConditions") or []
        if isinstance(condition, Mapping)
    )
    if decided:
        return dict(policy or {})
    return {**(policy or {}), "rules": [copy.deepcopy(dict(DISRUPTION_RULE)), *rules]}


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
