"""``status.decide``: the one wait decision, from observations given as data (pure; time is a number)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.status import Observation, PhaseClock, Target, decide
from tests.unit.pod_objects import GPU_MESSAGE, unschedulable_pod

T0 = 1_700_000_000.0
TARGET = Target("Job", "ft", "ml", "u1", started_at=T0)


def job(uid: str = "u1", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "ft",
            "namespace": "ml",
            "uid": uid,
            "creationTimestamp": "2023-11-14T22:13:20Z",
        },
        "spec": {"backoffLimit": 0},
        "status": status,
    }


def condition(type_: str, reason: str, message: str = "") -> dict[str, str]:
    return {"type": type_, "status": "True", "reason": reason, "message": message}


SUCCEEDED = job(conditions=[condition("Complete", "CompletionsReached", "done")], succeeded=1)
FAILED = job(conditions=[condition("Failed", "BackoffLimitExceeded", "Job has reached the backoff limit")])
RUNNING = job(active=1, ready=1, startTime="2023-11-14T22:13:20Z")
PENDING = job()
UNSCHEDULABLE_POD = unschedulable_pod()
RUNNING_POD = {
    "metadata": {"name": "ft-abc", "uid": "p1", "creationTimestamp": "2023-11-14T22:13:20Z"},
    "spec": {"nodeName": "n", "containers": [{"name": "main"}]},
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {"name": "main", "ready": True, "state": {"running": {"startedAt": "2023-11-14T22:13:30Z"}}}
        ],
    },
}


def run(
    observed: Observation,
    now: float = T0,
    deadlines: Deadlines | None = None,
    clock: PhaseClock | None = None,
):
    return decide(TARGET, observed, now=now, deadlines=deadlines or Deadlines(), clock=clock or PhaseClock())


def test_a_job_deleted_right_after_it_succeeded_reads_as_succeeded() -> None:
    decision = run(Observation(None, tombstone=SUCCEEDED))
    assert decision.verdict == "succeeded" and decision.vanished
    assert decision.message == "Job ml/ft succeeded (CompletionsReached): done (then deleted)"
    assert decision.uid == "u1"


def test_a_failed_tombstone_reads_as_failed() -> None:
    decision = run(Observation(None, tombstone=FAILED))
    assert decision.verdict == "failed" and decision.state.reason == "BackoffLimitExceeded"


def test_deleted_while_waiting_is_an_error() -> None:
    for tombstone in (None, RUNNING, job(uid="other", **SUCCEEDED["status"])):
        decision = run(Observation(None, tombstone=tombstone))
        assert decision.verdict == "error" and decision.message == "Job ml/ft was deleted while waiting"


def test_a_replacement_is_an_error_even_before_its_pods_are_known() -> None:
    decision = run(Observation(job(uid="u2", active=1), pods=None))
    assert decision.verdict == "error"
    assert decision.message == "Job ml/ft was replaced (uid u2, waited for u1)"


def test_an_empty_uid_accepts_whatever_has_the_name() -> None:
    sensor = Target("Job", "ft", "ml", "", started_at=T0)
    decision = decide(
        sensor,
        Observation(job(uid="u9", **SUCCEEDED["status"])),
        now=T0,
        deadlines=Deadlines(),
        clock=PhaseClock(),
    )
    assert decision.verdict == "succeeded" and decision.uid == "u9"


def test_terminal_states() -> None:
    assert run(Observation(SUCCEEDED)).message == "Job ml/ft succeeded (CompletionsReached): done"
    failed = run(Observation(FAILED))
    assert failed.verdict == "failed" and not failed.vanished


def test_pods_not_listed_yet_means_wait() -> None:
    assert run(Observation(SUCCEEDED, pods=None)).verdict == "wait"


def test_waiting_advances_the_clock_and_names_the_next_expiry() -> None:
    deadlines = Deadlines(admission_timeout=timedelta(seconds=30))
    decision = run(Observation(PENDING, pods=[UNSCHEDULABLE_POD]), now=T0 + 10, deadlines=deadlines)
    assert decision.verdict == "wait" and not decision.done
    assert decision.clock.phase == "admission"
    since = decision.clock.since  # the pod's creation (whole second: the latest instant it may mean)
    assert since == T0 + 1 and decision.next_look_at == since + 30


def test_a_budget_that_ran_out_is_named_as_the_user_wrote_it() -> None:
    deadlines = Deadlines(admission_timeout=timedelta(seconds=30))
    decision = run(Observation(PENDING, pods=[UNSCHEDULABLE_POD]), now=T0 + 40, deadlines=deadlines)
    assert decision.verdict == "deadline" and decision.expired == "admission_timeout"
    assert decision.message == f"admission_timeout 30s exceeded: {GPU_MESSAGE}"


def test_the_clock_is_carried_between_looks() -> None:
    deadlines = Deadlines(run_timeout=timedelta(seconds=60))
    first = run(Observation(RUNNING, pods=[RUNNING_POD]), now=T0 + 20, deadlines=deadlines)
    assert first.verdict == "wait" and first.clock.running_since == T0 + 11  # the container's start
    later = run(Observation(RUNNING, pods=[RUNNING_POD]), now=T0 + 80, deadlines=deadlines, clock=first.clock)
    assert later.verdict == "deadline" and later.expired == "run_timeout"
    assert later.message.startswith("run_timeout 1m exceeded: running (Running)")
