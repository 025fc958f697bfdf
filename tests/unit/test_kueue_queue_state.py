"""The pure reading of a Kueue Workload (status/kueue.py) and the admission deadline message it feeds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.status.clock import PhaseClock
from airflow_k8s_ml.status.kueue import (
    QueueState,
    admission_reason,
    follow,
    queue_line,
    queue_state,
    queued_job_uid,
    workload_for,
)
from airflow_k8s_ml.status.wait import Observation, Target, decide

PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
    "default-flavor, 1 more needed"
)


def _cond(kind: str, status: str, reason: str, message: str = "", at: str = "2026-12-02T06:00:00Z") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def _workload(*conditions: dict[str, Any], uid: str = "job-uid", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-train-3f2a1",
            "creationTimestamp": "2026-12-02T05:59:00Z",
            "labels": {"kueue.x-k8s.io/job-uid": uid},
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": uid, "controller": True}],
        },
        "spec": {"queueName": "gpu"},
        "status": {"conditions": list(conditions), **status},
    }


PENDING = _workload(_cond("QuotaReserved", "False", "Pending", PENDING_MESSAGE))
ADMITTED = _workload(
    _cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue"),
    _cond("Admitted", "True", "Admitted", "The workload is admitted", at="2026-12-02T06:01:02Z"),
    admission={"clusterQueue": "cluster-queue", "podSetAssignments": []},
)
PREEMPTED = _workload(
    _cond("QuotaReserved", "False", "Preempted", "Preempted to accommodate a higher priority Workload"),
    _cond("Admitted", "False", "NoReservation", "The workload has no reservation"),
    _cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"),
    requeueState={"count": 1},
)


def test_pending_reads_queue_reason_and_message() -> None:
    state = queue_state(PENDING)
    assert (state.workload, state.queue, state.admitted, state.reason) == (
        "job-train-3f2a1",
        "gpu",
        False,
        "Pending",
    )
    assert state.message == PENDING_MESSAGE
    assert state.waiting and not state.evicted and state.admitted_at is None and state.position is None
    line = queue_line("Job ns/train", state)
    assert line == f"Job ns/train waiting for admission in queue gpu [Pending]: {PENDING_MESSAGE}"


def test_position_when_known() -> None:
    state = queue_state(PENDING, position=2)  # Kueue's count from 0; the log's from 1
    assert "queue gpu, position 3 (2 ahead) [Pending]" in queue_line("Job ns/train", state)
    assert state.key() != queue_state(PENDING, position=1).key()
    first = queue_line("Job ns/train", queue_state(PENDING, position=0))
    assert "queue gpu, position 1 (next in line) [Pending]" in first


def test_admitted_reads_time_and_cluster_queue() -> None:
    state = queue_state(ADMITTED)
    assert state.admitted and not state.waiting
    assert (state.admitted_at, state.cluster_queue) == ("2026-12-02T06:01:02Z", "cluster-queue")
    line = queue_line("Job ns/train", state)
    assert line == "Job ns/train admitted by queue gpu (ClusterQueue cluster-queue) at 2026-12-02T06:01:02Z"


def test_preempted_is_evicted_waiting_and_said_so() -> None:
    state = queue_state(PREEMPTED)
    assert state.evicted and state.preempted and state.waiting and not state.admitted
    assert state.requeues == 1
    line = queue_line("Job ns/train", state)
    assert line.startswith("Job ns/train was preempted in queue gpu: Preempted to accommodate a higher")
    assert "requeues it" in line
    assert (
        admission_reason(state) == "evicted (Preempted): Preempted to accommodate a higher priority Workload"
    )


def test_other_evictions_name_their_reason() -> None:
    wl = _workload(_cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout"))
    state = queue_state(wl)
    assert not state.preempted
    assert queue_line("Job ns/t", state).startswith("Job ns/t was evicted (PodsReadyTimeout)")


def test_a_change_of_state_changes_the_key() -> None:
    keys = {queue_state(w).key() for w in (PENDING, ADMITTED, PREEMPTED)}
    assert len(keys) == 3
    assert queue_state(PENDING).key() == queue_state(_workload(*PENDING["status"]["conditions"])).key()


def test_empty_workload_reads_as_waiting_without_reason() -> None:
    state = queue_state({"metadata": {"name": "w"}, "spec": {"queueName": "q"}})
    assert state == QueueState(workload="w", queue="q")
    assert admission_reason(state) == "waiting in queue q"


def test_workload_for_by_label_or_owner_newest_first() -> None:
    other = _workload(uid="other")
    owned_only = _workload(uid="job-uid")
    owned_only["metadata"]["labels"] = {}
    owned_only["metadata"]["creationTimestamp"] = "2026-12-02T06:05:00Z"
    assert workload_for([other], "job-uid") is None
    assert workload_for([other, PENDING], "job-uid") is PENDING
    assert workload_for([PENDING, owned_only], "job-uid") is owned_only
    assert workload_for([PENDING], "") is None


def _suspended_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "job-uid",
            "creationTimestamp": "2026-12-02T05:59:00Z",
        },
        "spec": {"suspend": True},
        "status": {
            "conditions": [
                {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}
            ]
        },
    }


def test_admission_deadline_carries_kueues_reason() -> None:
    target = Target("Job", "train", "ns", "job-uid", started_at=0.0)
    deadlines = Deadlines(admission_timeout=timedelta(minutes=30))
    clock = PhaseClock("admission", since=0.0)
    observed = Observation(_suspended_job(), [], queue=queue_state(PENDING))
    decision = decide(target, observed, now=31 * 60.0, deadlines=deadlines, clock=clock)
    assert decision.verdict == "deadline" and decision.expired == "admission_timeout"
    assert decision.message == f"admission_timeout 30m exceeded: {PENDING_MESSAGE}"


def test_admission_deadline_without_kueue_is_unchanged() -> None:
    target = Target("Job", "train", "ns", "job-uid", started_at=0.0)
    deadlines = Deadlines(admission_timeout=timedelta(minutes=30))
    clock = PhaseClock("admission", since=0.0)
    decision = decide(
        target, Observation(_suspended_job(), []), now=31 * 60.0, deadlines=deadlines, clock=clock
    )
    assert decision.verdict == "deadline"
    assert "couldn't assign flavors" not in decision.message


def test_preempted_job_is_back_under_the_admission_budget() -> None:
    """Kueue re-suspends an evicted job: the admission phase starts again (a fresh budget from now)."""
    target = Target("Job", "train", "ns", "job-uid", started_at=0.0)
    deadlines = Deadlines(admission_timeout=timedelta(minutes=30))
    clock = PhaseClock("running", since=0.0, running_since=0.0)
    observed = Observation(_suspended_job(), [], queue=queue_state(PREEMPTED))
    decision = decide(target, observed, now=3600.0, deadlines=deadlines, clock=clock)
    assert decision.verdict == "wait" and decision.clock.phase == "admission"
    assert decision.clock.since == 3600.0 and decision.next_look_at == 3600.0 + 30 * 60
    late = decide(target, observed, now=3600.0 + 31 * 60, deadlines=deadlines, clock=decision.clock)
    assert late.verdict == "deadline"
    assert late.message == (
        "admission_timeout 30m exceeded: evicted (Preempted): "
        "Preempted to accommodate a higher priority Workload"
    )


def test_follow_logs_once_per_change() -> None:
    state, line = follow(None, [], "job-uid", "Job ns/train")
    assert (state, line) == (None, None)
    state, line = follow(None, [PENDING], "job-uid", "Job ns/train")
    assert state is not None and line is not None and "waiting for admission in queue gpu" in line
    again, line = follow(state, [PENDING], "job-uid", "Job ns/train")
    assert again == state and line is None
    admitted, line = follow(state, [ADMITTED], "job-uid", "Job ns/train")
    assert admitted is not None and admitted.admitted and line is not None and "admitted by" in line
    kept, line = follow(admitted, [], "job-uid", "Job ns/train")
    assert kept is admitted and line is None


def test_queued_job_uid_needs_the_queue_label() -> None:
    job = _suspended_job()
    assert queued_job_uid(job) is None
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "gpu"}
    assert queued_job_uid(job) == "job-uid"


def test_a_preemption_is_said_once_across_its_intermediate_updates() -> None:
    """Kueue sets Evicted True while Admitted is still True, then drops Admitted: one line, not two."""
    evicting = _workload(
        _cond("Admitted", "True", "Admitted", "The workload is admitted"),
        _cond("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"),
    )
    first, line = follow(queue_state(ADMITTED), [evicting], "job-uid", "Job ns/train")
    assert line is not None and "was preempted" in line
    _, again = follow(first, [PREEMPTED], "job-uid", "Job ns/train")
    assert again is None
