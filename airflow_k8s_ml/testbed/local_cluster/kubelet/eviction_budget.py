"""Whether the Eviction API may evict a pod under its PodDisruptionBudget, as upstream's eviction REST
(pkg/registry/core/pod/storage/eviction.go) decides it. Pure: the pod and the namespace's budgets in, a
verdict out; the handler in :mod:`.eviction` does the writes.

Upstream's order: a pod that already caused its disruption (terminal, pending, or being deleted) is evicted
without a budget (``canIgnorePDB``); more than one matching budget is a 500; none lets the eviction through;
an unready pod is let through while the budget is met (``IfHealthyBudget``); a budget the disruption
controller has not processed yet (``observedGeneration < generation``) or one with no disruption left
answers 429 "Cannot evict pod as it would violate the pod's disruption budget." with a ``DisruptionBudget``
cause; else the eviction spends one disruption (``disruptionsAllowed - 1``, the pod in ``disruptedPods``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

from .. import errors

Obj = dict[str, Any]

#: The message of upstream's 429 (what ``kubectl drain`` prints while it retries).
VIOLATES_BUDGET = "Cannot evict pod as it would violate the pod's disruption budget."
#: ``policyv1.DisruptionBudgetCause``.
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


@dataclass(frozen=True)
class BudgetVerdict:
    """``spend``: the budget whose ``disruptionsAllowed`` the eviction decrements (None: no budget to
    charge). An eviction the budgets forbid is raised as a :class:`~..errors.StatusError` instead."""

    spend: Obj | None = None


def ignores_budget(pod: Mapping[str, Any]) -> bool:
    """``canIgnorePDB``: the pod is terminal, pending, or already being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(
        (pod.get("metadata") or {}).get("deletionTimestamp")
    )


def matching_budgets(pod: Mapping[str, Any], budgets: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """``getPodDisruptionBudgets``: the budgets whose selector matches the pod (a nil selector matches none,
    an empty one every pod; an unparsable one is skipped, as upstream's ``continue`` on error)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    found: list[Obj] = []
    for pdb in budgets:
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is None:
            continue
        try:
            if label_selector_from_match(selector).matches(labels):
                found.append(dict(pdb))
        except SelectorError:
            continue
    return found


def _is_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def too_many_requests(message: str, retry_after: int, cause: str) -> errors.StatusError:
    """``errors.NewTooManyRequests`` with a ``DisruptionBudget`` cause (no ``Retry-After`` header at 0)."""
    details: dict[str, Any] = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    headers: dict[str, str] = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return errors.StatusError(429, "TooManyRequests", message, details, headers=headers)


def decide_eviction(pod: Mapping[str, Any], budgets: Iterable[Mapping[str, Any]]) -> BudgetVerdict:
    """May the pod be evicted now, and which budget pays for it? Raises the API's answer when not."""
    if ignores_budget(pod):
        return BudgetVerdict()
    found = matching_budgets(pod, budgets)
    if len(found) > 1:
        raise errors.internal_error(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    if not found:
        return BudgetVerdict()
    pdb = found[0]
    name = pdb["metadata"]["name"]
    status = pdb.get("status") or {}
    healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
    if not _is_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        if policy == "AlwaysAllow" or (healthy >= desired and desired > 0):
            return BudgetVerdict()
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        raise too_many_requests(
            VIOLATES_BUDGET, 10, f"The disruption budget {name} is still being processed by the server."
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.StatusError(
            403,
            "Forbidden",
            f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is negative',
            {"name": name, "group": "policy", "kind": "poddisruptionbudgets"},
        )
    if allowed == 0:
        raise too_many_requests(
            VIOLATES_BUDGET,
            0,
            f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently",
        )
    return BudgetVerdict(spend=pdb)
