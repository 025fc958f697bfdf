"""Replica arithmetic of the deployment controller (pkg/controller/deployment/util), pure.

Surge and unavailability fenceposts, how far the new ReplicaSet may grow during a rolling update, which old
ReplicaSet to scale down first, proportional scaling of several active ReplicaSets when the Deployment is
resized mid-rollout, and which old ReplicaSets the revision history limit lets go. ReplicaSets are plain
dicts as stored; each function reads only what upstream reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

Obj = dict[str, Any]

REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
MAX_INT32 = 2**31 - 1


# -- accessors -----------------------------------------------------------------------------------------
def spec_replicas(obj: Obj | None) -> int:
    if obj is None:
        return 0
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_count(obj: Obj | None, name: str) -> int:
    return int(((obj or {}).get("status") or {}).get(name) or 0)


def annotation_int(obj: Obj, name: str) -> int | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def revision(rs: Obj) -> int:
    """``deploymentutil.Revision``: 0 when the annotation is missing or not a number."""
    return annotation_int(rs, REVISION) or 0


def max_revision(replicasets: list[Obj]) -> int:
    return max((revision(rs) for rs in replicasets), default=0)


def created_key(obj: Obj) -> tuple[str, str]:
    """``ReplicaSetsByCreationTimestamp``: oldest first, name breaks ties (timestamps have 1 s precision)."""
    meta = obj.get("metadata") or {}
    return (meta.get("creationTimestamp") or "", meta.get("name") or "")


def active(replicasets: Sequence[Obj | None]) -> list[Obj]:
    """``FilterActiveReplicaSets``: those that should have pods."""
    return [rs for rs in replicasets if rs is not None and spec_replicas(rs) > 0]


def total_spec(replicasets: Sequence[Obj | None]) -> int:
    return sum(spec_replicas(rs) for rs in replicasets if rs is not None)


def total_status(replicasets: Sequence[Obj | None], name: str) -> int:
    return sum(status_count(rs, name) for rs in replicasets if rs is not None)


# -- fenceposts ----------------------------------------------------------------------------------------
def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` (a missing value counts as 0)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%") or not text[:-1].isdigit():
        raise ValueError(f"invalid value for IntOrString: invalid value {text!r}")
    scaled = float(text[:-1]) * float(total) / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)


def is_rolling(deployment: Obj) -> bool:
    return ((deployment.get("spec") or {}).get("strategy") or {}).get("type") == "RollingUpdate"


def resolve_fenceposts(surge: Any, unavailable: Any, desired: int) -> tuple[int, int]:
    """Surge rounds up, unavailability down; both 0 would deadlock, so unavailability becomes 1."""
    max_surge = scaled_value(surge, desired, True)
    max_unavailable = scaled_value(unavailable, desired, False)
    if max_surge == 0 and max_unavailable == 0:
        max_unavailable = 1
    return max_surge, max_unavailable


def _rolling(deployment: Obj) -> Obj:
    return ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}


def max_unavailable(deployment: Obj) -> int:
    desired = spec_replicas(deployment)
    if not is_rolling(deployment) or desired == 0:
        return 0
    rolling = _rolling(deployment)
    _, unavailable = resolve_fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"), desired)
    return min(unavailable, desired)


def max_surge(deployment: Obj) -> int:
    if not is_rolling(deployment):
        return 0
    rolling = _rolling(deployment)
    surge, _ = resolve_fenceposts(
        rolling.get("maxSurge"), rolling.get("maxUnavailable"), spec_replicas(deployment)
    )
    return surge


# -- rollout steps -------------------------------------------------------------------------------------
def new_rs_new_replicas(deployment: Obj, all_rss: Sequence[Obj | None], new_rs: Obj) -> int:
    """``NewRSNewReplicas``: how large the new ReplicaSet may be now without breaking maxSurge."""
    desired = spec_replicas(deployment)
    if not is_rolling(deployment):
        return desired
    current = total_spec(all_rss)
    max_total = desired + max_surge(deployment)
    if current >= max_total:
        return spec_replicas(new_rs)
    scale_up = min(max_total - current, desired - spec_replicas(new_rs))
    return spec_replicas(new_rs) + scale_up


def max_scaled_down(deployment: Obj, all_rss: Sequence[Obj | None], new_rs: Obj) -> int:
    """How many old pods ``reconcileOldReplicaSets`` may remove while keeping minimum availability."""
    min_available = spec_replicas(deployment) - max_unavailable(deployment)
    new_unavailable = spec_replicas(new_rs) - status_count(new_rs, "availableReplicas")
    return total_spec(all_rss) - min_available - new_unavailable


def unhealthy_cleanup_plan(old_rss: list[Obj], max_cleanup: int) -> list[tuple[Obj, int]]:
    """``cleanupUnhealthyReplicas``: (rs, new size) removing unavailable old pods first, oldest first."""
    plan: list[tuple[Obj, int]] = []
    total = 0
    for rs in sorted(old_rss, key=created_key):
        if total >= max_cleanup:
            break
        replicas, available = spec_replicas(rs), status_count(rs, "availableReplicas")
        if replicas == 0 or replicas == available:
            continue
        count = min(max_cleanup - total, replicas - available)
        plan.append((rs, replicas - count))
        total += count
    return plan


def rolling_scale_down_plan(
    deployment: Obj, all_rss: Sequence[Obj | None], old_rss: list[Obj]
) -> list[tuple[Obj, int]]:
    """``scaleDownOldReplicaSetsForRollingUpdate``: shed available old pods down to minAvailable."""
    min_available = spec_replicas(deployment) - max_unavailable(deployment)
    available = total_status(all_rss, "availableReplicas")
    if available <= min_available:
        return []
    budget = available - min_available
    plan: list[tuple[Obj, int]] = []
    done = 0
    for rs in sorted(old_rss, key=created_key):
        if done >= budget:
            break
        replicas = spec_replicas(rs)
        if replicas == 0:
            continue
        count = min(replicas, budget - done)
        plan.append((rs, replicas - count))
        done += count
    return plan


# -- proportional scaling ------------------------------------------------------------------------------
def find_active_or_latest(new_rs: Obj | None, old_rss: list[Obj]) -> Obj | None:
    """``FindActiveOrLatest``: the only active ReplicaSet, or the newest when none is active."""
    if new_rs is None and not old_rss:
        return None
    newest_first = sorted(old_rss, key=created_key, reverse=True)
    candidates = active([*newest_first, new_rs])
    if len(candidates) == 0:
        return new_rs if new_rs is not None else newest_first[0]
    if len(candidates) == 1:
        return candidates[0]
    return None


def is_saturated(deployment: Obj, rs: Obj | None) -> bool:
    if rs is None:
        return False
    desired = annotation_int(rs, DESIRED_REPLICAS)
    replicas = spec_replicas(deployment)
    return (
        desired is not None
        and spec_replicas(rs) == replicas
        and desired == replicas
        and status_count(rs, "availableReplicas") == replicas
    )


def _round_half_away(value: float) -> int:
    return math.floor(value + 0.5) if value >= 0 else -math.floor(-value + 0.5)


def _fraction(rs: Obj, deployment: Obj) -> int:
    """``getReplicaSetFraction``: this ReplicaSet's share of the resize."""
    if spec_replicas(deployment) == 0:
        return -spec_replicas(rs)
    deployment_max = spec_replicas(deployment) + max_surge(deployment)
    before = annotation_int(rs, MAX_REPLICAS) or 0
    if before == 0:
        before = status_count(deployment, "replicas")
        if before == 0:
            return 0
    return _round_half_away(spec_replicas(rs) * deployment_max / before) - spec_replicas(rs)


def _proportion(rs: Obj, deployment: Obj, to_add: int, added: int) -> int:
    if spec_replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = _fraction(rs, deployment)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def proportional_sizes(deployment: Obj, active_rss: list[Obj]) -> tuple[list[tuple[Obj, int]], str]:
    """``DeploymentController.scale`` for several active ReplicaSets of a rolling Deployment: new sizes
    (largest first) and the scaling direction for the events."""
    replicas = spec_replicas(deployment)
    allowed = replicas + max_surge(deployment) if replicas > 0 else 0
    to_add = allowed - total_spec(active_rss)
    operation = ""
    ordered = list(active_rss)
    if to_add > 0:
        ordered.sort(key=created_key, reverse=True)  # newer first among equals
        ordered.sort(key=spec_replicas, reverse=True)
        operation = "up"
    elif to_add < 0:
        ordered.sort(key=created_key)  # older first among equals
        ordered.sort(key=spec_replicas, reverse=True)
        operation = "down"
    sizes: list[int] = []
    added = 0
    for rs in ordered:
        if to_add != 0:
            share = _proportion(rs, deployment, to_add, added)
            sizes.append(spec_replicas(rs) + share)
            added += share
        else:
            sizes.append(spec_replicas(rs))
    if ordered and to_add != 0:
        sizes[0] = max(sizes[0] + to_add - added, 0)
    return list(zip(ordered, sizes, strict=True)), operation


# -- history -------------------------------------------------------------------------------------------
def history_to_delete(deployment: Obj, old_rss: list[Obj]) -> list[Obj]:
    """``cleanupDeployment``: the oldest revisions beyond revisionHistoryLimit that are fully scaled down."""
    limit = (deployment.get("spec") or {}).get("revisionHistoryLimit")
    if limit is None or limit == MAX_INT32:
        return []
    alive = [rs for rs in old_rss if not (rs.get("metadata") or {}).get("deletionTimestamp")]
    excess = len(alive) - int(limit)
    if excess <= 0:
        return []
    ordered = sorted(alive, key=lambda rs: (revision(rs), created_key(rs)))
    doomed = []
    for rs in ordered[:excess]:
        observed = status_count(rs, "observedGeneration")
        generation = int((rs.get("metadata") or {}).get("generation") or 0)
        if status_count(rs, "replicas") != 0 or spec_replicas(rs) != 0 or generation > observed:
            continue
        doomed.append(rs)
    return doomed
