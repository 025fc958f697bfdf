"""Submit-or-adopt decision (pure): every case of a retry, without a cluster."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.operators._adopt import (
    Adopt,
    Launch,
    ReturnResult,
    WorkloadRecord,
    decide,
    observe,
)


def job(
    attempt: int, condition: str | None = None, *, active: int = 0, resumed_from: str | None = None
) -> Any:
    status: dict[str, Any] = {"active": active}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True", "reason": f"{condition}Reason"}]
    annotations = {"airflow-k8s-ml/resumed-from": resumed_from} if resumed_from else {}
    return observe(
        {
            "metadata": {
                "name": f"d-t-abc-a{attempt}",
                "uid": f"uid-{attempt}",
                "labels": {"airflow-k8s-ml/attempt": str(attempt)},
                "annotations": annotations,
            },
            "status": status,
        },
        "Job",
    )


def record(attempt: int = 1, result: dict[str, Any] | None = None) -> WorkloadRecord:
    return WorkloadRecord(
        "Job", "batch/v1", f"d-t-abc-a{attempt}", "ml", f"uid-{attempt}", attempt, 1.0, None, result
    )


def test_nothing_known_launches_attempt_1() -> None:
    assert decide(None, []) == Launch(attempt=1)


def test_an_active_workload_is_adopted_even_without_a_record() -> None:
    running = job(1, active=1)
    assert decide(None, [running]) == Adopt(running)
    assert decide(record(1), [running]) == Adopt(running)


def test_pending_counts_as_active() -> None:
    created = job(1)  # no pods yet, no conditions: pending
    assert isinstance(decide(None, [created]), Adopt)


def test_the_newest_active_is_adopted_and_others_are_reported() -> None:
    old, new = job(1, active=1), job(2, active=1)
    assert decide(None, [old, new]) == Adopt(new, (old,))


def test_a_cached_success_returns_even_when_the_object_is_gone() -> None:
    cached = {"name": "d-t-abc-a1", "reason": "CompletionsReached"}
    assert decide(record(1, cached), []) == ReturnResult(cached=cached)


def test_a_succeeded_workload_found_by_labels_returns_its_result() -> None:
    done = job(1, "Complete")
    assert decide(None, [done]) == ReturnResult(workload=done)


def test_a_failed_workload_launches_the_next_attempt() -> None:
    failed = job(1, "Failed")
    assert decide(record(1), [failed]) == Launch(attempt=2, previous=failed)


def test_the_next_attempt_follows_the_highest_seen_anywhere() -> None:
    failed = [job(1, "Failed"), job(3, "Failed")]
    assert decide(record(2), failed).attempt == 4  # type: ignore[union-attr]
    assert decide(record(5), []) == Launch(attempt=6)  # the object was deleted; the record remembers


def test_activity_wins_over_a_cached_result() -> None:
    # Never two active workloads: whatever the record says, a running one is adopted, not shadowed.
    running = job(2, active=1)
    assert decide(record(1, {"cached": True}), [running]) == Adopt(running)


def test_observe_reads_attempt_state_and_resume_source() -> None:
    seen = job(3, "Complete", resumed_from="s3://b/step-2/")
    assert (seen.attempt, seen.state.phase, seen.resumed_from) == (3, "succeeded", "s3://b/step-2/")
    unlabelled = observe({"metadata": {"name": "x", "uid": "u"}}, "Job")
    assert unlabelled.attempt == 0


def test_record_round_trips_and_tolerates_garbage() -> None:
    original = record(2, {"reason": "CompletionsReached"})
    assert WorkloadRecord.from_dict(original.to_dict()) == original
    assert original.identity() == {"kind": "Job", "name": "d-t-abc-a2", "namespace": "ml", "uid": "uid-2"}
    for garbage in (None, "uid-1", {"kind": "Job"}, {**original.to_dict(), "attempt": "two"}):
        assert WorkloadRecord.from_dict(garbage) is None
