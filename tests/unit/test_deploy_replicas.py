"""Replica arithmetic of the deployment controller, with cases from upstream's deployment util tests."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.controllers.deployment import replicas as rep


def deployment(
    replicas: int, surge: Any = "25%", unavailable: Any = "25%", history: int = 10, status_replicas: int = 0
) -> dict[str, Any]:
    return {
        "metadata": {"name": "d", "generation": 1},
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": history,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
            },
        },
        "status": {"replicas": status_replicas},
    }


def rs(
    name: str,
    replicas: int,
    created: str = "2024-01-01T00:00:00Z",
    available: int = 0,
    revision: int = 1,
    max_replicas: int | None = None,
    status_replicas: int | None = None,
) -> dict[str, Any]:
    annotations = {rep.REVISION: str(revision)}
    if max_replicas is not None:
        annotations[rep.MAX_REPLICAS] = str(max_replicas)
    return {
        "metadata": {
            "name": name,
            "uid": name,
            "creationTimestamp": created,
            "annotations": annotations,
            "generation": 1,
        },
        "spec": {"replicas": replicas},
        "status": {
            "replicas": replicas if status_replicas is None else status_replicas,
            "availableReplicas": available,
            "observedGeneration": 1,
        },
    }


@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("25%", "25%", 1, (1, 0)),
        ("25%", "25%", 10, (3, 2)),
        (0, 0, 4, (0, 1)),  # both zero would deadlock: one may be unavailable
        ("0%", "0%", 3, (0, 1)),
        (2, "50%", 5, (2, 2)),
    ],
)
def test_fenceposts(surge: Any, unavailable: Any, desired: int, expected: tuple[int, int]) -> None:
    assert rep.resolve_fenceposts(surge, unavailable, desired) == expected


def test_max_unavailable_is_capped_and_zero_for_recreate() -> None:
    assert rep.max_unavailable(deployment(2, unavailable=5)) == 2
    recreate = deployment(3)
    recreate["spec"]["strategy"] = {"type": "Recreate"}
    assert rep.max_unavailable(recreate) == 0 and rep.max_surge(recreate) == 0
    assert rep.new_rs_new_replicas(recreate, [], rs("new", 0)) == 3


def test_new_replica_set_grows_within_surge() -> None:
    d = deployment(4, surge=1, unavailable=0)
    old = rs("old", 4, available=4)
    assert rep.new_rs_new_replicas(d, [old, rs("new", 0)], rs("new", 0)) == 1
    assert rep.new_rs_new_replicas(d, [old, rs("new", 1)], rs("new", 1)) == 1  # at maxSurge already
    assert rep.new_rs_new_replicas(d, [rs("old", 1), rs("new", 1)], rs("new", 1)) == 4


def test_old_pods_removed_unhealthy_first_then_down_to_min_available() -> None:
    d = deployment(4, surge=1, unavailable=1)
    old, new = rs("old", 4, available=3), rs("new", 1, available=1)
    budget = rep.max_scaled_down(d, [old, new], new)
    assert budget == 5 - 3 - 0
    assert [(r["metadata"]["name"], size) for r, size in rep.unhealthy_cleanup_plan([old], budget)] == [
        ("old", 3)
    ]
    shrunk = rs("old", 3, available=3)
    plan = rep.rolling_scale_down_plan(d, [shrunk, new], [shrunk])
    assert [(r["metadata"]["name"], size) for r, size in plan] == [("old", 2)]


@pytest.mark.parametrize(
    ("new_size", "old_size", "before", "after", "expected_new", "expected_old"),
    [
        (2, 3, 5, 10, 4, 6),  # upstream "proportional scaling: 5 -> 10"
        (2, 3, 5, 3, 1, 2),  # upstream "proportional scaling: 5 -> 3"
    ],
)
def test_proportional_scaling(
    new_size: int, old_size: int, before: int, after: int, expected_new: int, expected_old: int
) -> None:
    d = deployment(after, surge=0, unavailable=0)
    new = rs("foo-v2", new_size, created="2024-01-02T00:00:00Z", max_replicas=before)
    old = rs("foo-v1", old_size, created="2024-01-01T00:00:00Z", max_replicas=before)
    plan, _ = rep.proportional_sizes(d, [old, new])
    assert {r["metadata"]["name"]: size for r, size in plan} == {
        "foo-v2": expected_new,
        "foo-v1": expected_old,
    }


def test_active_or_latest_and_saturation() -> None:
    new, old = rs("new", 0, created="2024-01-02T00:00:00Z"), rs("old", 0)
    assert rep.find_active_or_latest(new, [old]) is new
    assert rep.find_active_or_latest(None, [old, rs("older", 0, created="2023-01-01T00:00:00Z")]) is old
    assert rep.find_active_or_latest(rs("new", 2), [rs("old", 1)]) is None
    saturated = rs("new", 3, available=3)
    saturated["metadata"]["annotations"][rep.DESIRED_REPLICAS] = "3"
    assert rep.is_saturated(deployment(3), saturated)
    assert not rep.is_saturated(deployment(4), saturated)


def test_history_limit_deletes_oldest_scaled_down_revisions() -> None:
    d = deployment(1, history=1)
    olds = [
        rs("r1", 0, revision=1),
        rs("r2", 0, revision=2),
        rs("r3", 0, revision=3),
        rs("busy", 1, revision=0),
    ]
    assert [r["metadata"]["name"] for r in rep.history_to_delete(d, olds)] == ["r1", "r2"]
    assert [r["metadata"]["name"] for r in rep.history_to_delete(deployment(1, history=1), olds[:2])] == [
        "r1"
    ]
    stale = rs("r0", 0, revision=0, status_replicas=1)  # pods still going away: kept
    assert rep.history_to_delete(d, [stale, rs("r9", 0, revision=9)]) == []
