"""A queued job's position from Kueue's visibility API (status/kueue.py): which item of a
``PendingWorkloadsSummary`` is ours, when to ask, and how the task log shows it."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.status.kueue import (
    PositionAsked,
    follow,
    next_position_ask,
    position_in,
    position_text,
)

from .test_kueue_queue_state import ADMITTED, PENDING, PENDING_MESSAGE, _cond, _workload


def _item(name: str, uid: str, in_cq: int, in_lq: int | None = None) -> dict[str, Any]:
    """One PendingWorkload as upstream's newPendingWorkload writes it (ownerReferences without controller)."""
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": "2026-12-02T05:59:00Z",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name[4:], "uid": uid}],
        },
        "priority": 0,
        "localQueueName": "gpu",
        "positionInClusterQueue": in_cq,
        "positionInLocalQueue": in_cq if in_lq is None else in_lq,
    }


def _summary(*items: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta1",
        "items": list(items),
    }


SUMMARY = _summary(_item("job-other-aaaaa", "other-uid", 0), _item("job-train-3f2a1", "job-uid", 3, in_lq=1))


def test_ours_by_owner_uid_and_the_cluster_queue_position() -> None:
    assert position_in(SUMMARY, "job-uid", "") == 3  # positionInClusterQueue: the admission order
    assert position_in(SUMMARY, "other-uid", "") == 0


def test_ours_by_workload_name_when_the_uid_is_not_listed() -> None:
    assert position_in(SUMMARY, "unknown", "job-train-3f2a1") == 3


def test_not_listed_or_not_a_summary_gives_none() -> None:
    assert position_in(SUMMARY, "absent", "job-absent-00000") is None
    assert position_in(_summary(), "job-uid", "job-train-3f2a1") is None
    assert position_in({"kind": "Status", "code": 404}, "job-uid", "job-train-3f2a1") is None
    broken = _summary({"metadata": {"name": "job-train-3f2a1"}, "positionInClusterQueue": "3"}, "junk")
    assert position_in(broken, "job-uid", "job-train-3f2a1") is None


def test_shown_from_one() -> None:
    assert position_text(0) == "position 1 (next in line)"
    assert position_text(1) == "position 2 (1 ahead)"


def test_follow_carries_the_position_while_waiting_and_a_change_is_logged_again() -> None:
    first = _summary(_item("job-other-aaaaa", "other-uid", 0), _item("job-train-3f2a1", "job-uid", 1))
    state, line = follow(None, [PENDING], "job-uid", "Job ns/train", first)
    assert state is not None and state.position == 1
    assert line == (
        f"Job ns/train waiting for admission in queue gpu, position 2 (1 ahead) [Pending]: {PENDING_MESSAGE}"
    )
    assert follow(state, [PENDING], "job-uid", "Job ns/train", first)[1] is None  # once per change
    moved_up = _summary(_item("job-train-3f2a1", "job-uid", 0))
    state, line = follow(state, [PENDING], "job-uid", "Job ns/train", moved_up)
    assert line is not None and ", position 1 (next in line) [Pending]" in line


def test_follow_without_a_summary_is_todays_line() -> None:
    state, line = follow(None, [PENDING], "job-uid", "Job ns/train", None)
    assert state is not None and state.position is None
    assert line == f"Job ns/train waiting for admission in queue gpu [Pending]: {PENDING_MESSAGE}"


def test_an_admitted_workload_has_no_position_even_in_a_stale_summary() -> None:
    state, line = follow(None, [ADMITTED], "job-uid", "Job ns/train", SUMMARY)
    assert state is not None and state.admitted and state.position is None
    assert line is not None and "position" not in line


def _versioned(workload: dict[str, Any], version: str) -> dict[str, Any]:
    return {**workload, "metadata": {**workload["metadata"], "resourceVersion": version}}


def test_asked_on_each_change_of_the_workload_and_every_refresh_while_waiting() -> None:
    pending = _versioned(PENDING, "10")
    asked = next_position_ask(pending, None, now=100.0, every=30.0)
    assert asked == PositionAsked("10", 100.0, "gpu")  # the LocalQueue to ask, and when
    assert next_position_ask(pending, asked, now=129.0, every=30.0) is None  # unchanged, not yet due
    assert next_position_ask(pending, asked, now=130.0, every=30.0) == PositionAsked("10", 130.0, "gpu")
    changed = next_position_ask(_versioned(PENDING, "11"), asked, now=101.0, every=30.0)
    assert changed == PositionAsked("11", 101.0, "gpu")  # the Workload changed: asked at once


def test_never_asked_once_admitted_finished_or_without_a_workload() -> None:
    assert next_position_ask(_versioned(ADMITTED, "12"), None, now=100.0) is None
    finished = _workload(
        _cond("QuotaReserved", "False", "Pending", PENDING_MESSAGE), _cond("Finished", "True", "Succeeded")
    )
    assert next_position_ask(finished, None, now=100.0) is None
    assert next_position_ask(None, None, now=100.0) is None
