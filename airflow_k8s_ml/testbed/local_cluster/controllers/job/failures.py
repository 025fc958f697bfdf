"""How a Job judges pod failures: the podFailurePolicy rules (pod_failure_policy.go) and the exponential
back-off before replacement pods (backoff_utils.go). Pure functions of pods, times and settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .pods import finished_time

# (FailJob message or None, counts towards backoffLimit, matched action or None)
PolicyMatch = tuple[str | None, bool, str | None]


def match_pod_failure_policy(policy: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> PolicyMatch:
    """The first rule matching a failed pod decides: FailJob (with upstream's message), Ignore (not
    counted) or Count. No policy or no match counts the failure."""
    if policy is None:
        return None, True, None
    for index, rule in enumerate(policy.get("rules") or []):
        what = _rule_match(rule, pod)
        if what is None:
            continue
        action = rule.get("action")
        if action == "Ignore":
            return None, False, "Ignore"
        if action == "Count":
            return None, True, "Count"
        if action == "FailJob":
            return f"{what} matching FailJob rule at index {index}", True, "FailJob"
    return None, True, None


def _rule_match(rule: Mapping[str, Any], pod: Mapping[str, Any]) -> str | None:
    """What matched, worded as the start of upstream's FailJob message; None when the rule does not match."""
    if rule.get("onExitCodes") is not None:
        cs = _match_exit_codes(pod, rule["onExitCodes"])
        if cs is None:
            return None
        code = cs["state"]["terminated"].get("exitCode")
        return f"Container {cs.get('name')} for pod {_pod_ref(pod)} failed with exit code {code}"
    if rule.get("onPodConditions"):
        condition = _match_conditions(pod, rule["onPodConditions"])
        if condition is None:
            return None
        return f"Pod {_pod_ref(pod)} has condition {condition.get('type')}"
    return None


def _pod_ref(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _match_exit_codes(pod: Mapping[str, Any], req: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A terminated container (regular first, then init) with a non-zero exit code the rule matches."""
    status = pod.get("status") or {}
    for statuses in (status.get("containerStatuses") or [], status.get("initContainerStatuses") or []):
        for cs in statuses:
            terminated = (cs.get("state") or {}).get("terminated")
            if terminated is None:
                continue
            if req.get("containerName") not in (None, cs.get("name")):
                continue
            code = int(terminated.get("exitCode") or 0)
            if code != 0 and _operator_matches(code, req.get("operator"), req.get("values") or []):
                return cs
    return None


def _operator_matches(code: int, operator: str | None, values: Sequence[int]) -> bool:
    if operator == "In":
        return code in values
    if operator == "NotIn":
        return code not in values
    return False


def _match_conditions(
    pod: Mapping[str, Any], patterns: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") and condition.get("status") == pattern.get(
                "status", "True"
            ):
                return condition
    return None


# -- replacement back-off ------------------------------------------------------------------------------
@dataclass(frozen=True)
class BackoffRecord:
    """Consecutive failures since the last success and when the last of them happened."""

    failures_after_last_success: int = 0
    last_failure_time: float | None = None


def next_backoff_record(
    old: BackoffRecord, new_succeeded: Sequence[Mapping[str, Any]], new_failed: Sequence[Mapping[str, Any]]
) -> BackoffRecord:
    """``newBackoffRecord``: a success resets the count; failures after the latest success add up."""
    failed_times = sorted(finished_time(p) for p in new_failed)
    if not new_succeeded:
        if not failed_times:
            return old
        return BackoffRecord(old.failures_after_last_success + len(failed_times), failed_times[-1])
    last_success = max(finished_time(p) for p in new_succeeded)
    later = [t for t in failed_times if t > last_success]
    return BackoffRecord(len(later), later[-1] if later else None)


def backoff_duration(failures: int, base: float, cap: float) -> float:
    """``base * 2^(failures-1)``, capped."""
    if failures <= 0:
        return 0.0
    duration = base
    for _ in range(1, failures):
        duration *= 2
        if duration >= cap:
            return cap
    return min(duration, cap)


def remaining_backoff(record: BackoffRecord, now: float, base: float, cap: float) -> float:
    """Seconds to wait before creating a replacement pod (0 when none)."""
    if record.failures_after_last_success == 0 or record.last_failure_time is None:
        return 0.0
    duration = backoff_duration(record.failures_after_last_success, base, cap)
    elapsed = now - record.last_failure_time
    return 0.0 if duration < elapsed else duration - elapsed
