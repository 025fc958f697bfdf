"""``status.wait_report``: what a look says and gathers - a look and the previous state in, a report out
(pure; time is a number). Both waits (the triggerer's and the worker's) act only on this."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.status.kueue import QUEUE_NAME_LABEL, PositionAsked
from airflow_k8s_ml.status.wait import Target
from airflow_k8s_ml.status.wait_report import Diagnose, Line, Look, Said, position_ask, report
from tests.unit.pod_objects import GPU_MESSAGE, unschedulable_pod
from tests.unit.test_kueue_queue_state import ADMITTED, PENDING, PENDING_MESSAGE
from tests.unit.test_status_wait import FAILED, RUNNING, RUNNING_POD, SUCCEEDED, T0, TARGET, job

QUEUED_TARGET = Target("Job", "train", "ns", "job-uid", started_at=T0)
DEPLOY_TARGET = Target("Deployment", "digits", "ml", "d1", started_at=T0)
WAITING = f"Job ns/train waiting for admission in queue gpu [Pending]: {PENDING_MESSAGE}"


def queued_job(**status: Any) -> dict[str, Any]:
    """A Job queued by Kueue (``queue-name`` label), suspended until admitted."""
    obj = job(uid="job-uid", **status)
    obj["metadata"].update(name="train", namespace="ns", labels={QUEUE_NAME_LABEL: "gpu"})
    obj["spec"]["suspend"] = True
    return obj


def versioned(workload: dict[str, Any], version: str) -> dict[str, Any]:
    return {**workload, "metadata": {**workload["metadata"], "resourceVersion": version}}


def pod(name: str, uid: str, owner: str = "u1", **status: Any) -> dict[str, Any]:
    refs = [{"kind": "Job", "name": "ft", "uid": owner, "controller": True}]
    return {
        "metadata": {"name": name, "uid": uid, "ownerReferences": refs},
        "spec": {"containers": [{"name": "main"}]},
        "status": status,
    }


FAILED_POD = pod(
    "ft-bad",
    "p2",
    phase="Failed",
    containerStatuses=[{"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}],
)
DELETED_POD = pod("ft-gone", "p3", phase="Failed")
PREDECESSORS_POD = pod("ft-old", "p4", owner="u0", phase="Failed")


def deployment(updated: int, ready: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "digits", "namespace": "ml", "uid": "d1", "generation": 2, "annotations": {}},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 2,
            "replicas": 2,
            "updatedReplicas": updated,
            "readyReplicas": ready,
        },
    }


def look_at(target: Target, look: Look, said: Said | None = None, now: float = T0, **kwargs: Any):
    deadlines = kwargs.pop("deadlines", Deadlines())
    return report(target, look, said or Said(), now=now, deadlines=deadlines, **kwargs)


# -- decision, lines and diagnostics, one look at a time -----------------------------------------------------

CASES = [
    # (case, target, look, deadlines, verdict, lines, every_pod (None: nothing to diagnose), drain_logs)
    ("running: nothing to say", TARGET, Look(RUNNING, [RUNNING_POD]), {}, "wait", [], None, False),
    ("succeeded: drain the relay", TARGET, Look(SUCCEEDED, []), {}, "succeeded", [], None, True),
    ("failed: its failed pods", TARGET, Look(FAILED, [FAILED_POD]), {}, "failed", [], False, True),
    (
        "deleted right after success: nothing left to diagnose",
        TARGET,
        Look(None, tombstone=FAILED),
        {},
        "failed",
        [],
        None,
        True,
    ),
    ("replaced: an error", TARGET, Look(job(uid="other", **RUNNING["status"])), {}, "error", [], None, False),
    (
        "a budget ran out: said once, every pod",
        TARGET,
        Look(job(), [unschedulable_pod()]),
        {"admission_timeout": 10},
        "deadline",
        [
            Line("warning", f"Job ml/ft: pod ft-abc is stuck: Unschedulable: {GPU_MESSAGE}"),
            Line("warning", f"Job ml/ft: admission_timeout 10s exceeded: {GPU_MESSAGE}"),
        ],
        True,
        False,
    ),
    (
        "queued: Kueue's line",
        QUEUED_TARGET,
        Look(queued_job(), [], workloads=[PENDING]),
        {},
        "wait",
        [Line("info", WAITING)],
        None,
        False,
    ),
]


@pytest.mark.parametrize(
    ("target", "look", "budgets", "verdict", "lines", "every_pod", "drain"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_one_look(
    target: Target,
    look: Look,
    budgets: dict[str, float],
    verdict: str,
    lines: list[Line],
    every_pod: bool | None,
    drain: bool,
) -> None:
    told = look_at(target, look, now=T0 + 60, deadlines=Deadlines.parse(**budgets))
    assert told.decision.verdict == verdict
    assert list(told.lines) == lines
    assert (told.diagnose.every_pod if told.diagnose else None) == every_pod
    assert told.drain_logs == drain
    assert told.said.clock == told.decision.clock


# -- what changed since the last look -------------------------------------------------------------------


def test_a_queue_line_is_said_once_per_change_and_the_admission_time_travels() -> None:
    first = look_at(QUEUED_TARGET, Look(queued_job(), [], workloads=[PENDING]))
    again = look_at(QUEUED_TARGET, Look(queued_job(), [], workloads=[PENDING]), first.said, now=T0 + 1)
    not_read = look_at(QUEUED_TARGET, Look(queued_job(), []), again.said, now=T0 + 2)  # e.g. a 403
    admitted = look_at(QUEUED_TARGET, Look(queued_job(), [], workloads=[ADMITTED]), not_read.said, now=T0 + 3)
    assert [line.text for line in first.lines] == [WAITING]
    assert again.lines == () and not_read.lines == ()
    assert not_read.said.queue == first.said.queue  # the last state read still explains the wait
    assert [line.text for line in admitted.lines] == [
        "Job ns/train admitted by queue gpu (ClusterQueue cluster-queue) at 2026-12-02T06:01:02Z"
    ]
    assert admitted.admitted_at == "2026-12-02T06:01:02Z" and first.admitted_at is None


def test_an_expired_admission_budget_quotes_kueue() -> None:
    told = look_at(
        QUEUED_TARGET,
        Look(queued_job(), [], workloads=[PENDING]),
        now=T0 + 60,
        deadlines=Deadlines.parse(admission_timeout=30),
    )
    assert told.decision.message == f"admission_timeout 30s exceeded: {PENDING_MESSAGE}"
    assert [line.level for line in told.lines] == ["info", "warning"]  # the queue, then the expiry


def test_a_rollout_line_per_change_of_the_replica_counts() -> None:
    first = look_at(DEPLOY_TARGET, Look(deployment(1, 0), []))
    same = look_at(DEPLOY_TARGET, Look(deployment(1, 0), []), first.said, now=T0 + 1)
    moved = look_at(DEPLOY_TARGET, Look(deployment(2, 1), []), same.said, now=T0 + 2)
    assert len(first.lines) == 1 and first.lines[0].text.startswith(
        "rollout new revision: 1/2 updated, 0 ready"
    )
    assert same.lines == ()
    assert len(moved.lines) == 1 and "2/2 updated" in moved.lines[0].text


# -- position asks ---------------------------------------------------------------------------------------


def test_the_position_is_asked_on_a_change_of_the_workload_or_when_due() -> None:
    pending = versioned(PENDING, "10")
    look = Look(queued_job(), [], workloads=[pending])
    asked = position_ask(QUEUED_TARGET, look, Said(), now=100.0, every=30.0)
    assert asked == PositionAsked("10", 100.0, "gpu")
    said = Said().answered(asked, {"items": []})
    assert position_ask(QUEUED_TARGET, look, said, now=129.0, every=30.0) is None
    assert position_ask(QUEUED_TARGET, look, said, now=130.0, every=30.0) == PositionAsked("10", 130.0, "gpu")
    changed = Look(queued_job(), [], workloads=[versioned(PENDING, "11")])
    assert position_ask(QUEUED_TARGET, changed, said, now=101.0, every=30.0) == PositionAsked(
        "11", 101.0, "gpu"
    )


@pytest.mark.parametrize(
    ("target", "look"),
    [
        (QUEUED_TARGET, Look(queued_job(), [], workloads=[versioned(ADMITTED, "12")])),  # admitted
        (QUEUED_TARGET, Look(queued_job(), [])),  # Workloads not read
        (TARGET, Look(RUNNING, [], workloads=[PENDING])),  # not queued
        (QUEUED_TARGET, Look(None, tombstone=queued_job())),  # gone
        (replace(QUEUED_TARGET, uid="first"), Look(queued_job(), [], workloads=[PENDING])),  # replaced
    ],
    ids=["admitted", "not-read", "not-queued", "gone", "replaced"],
)
def test_no_position_ask(target: Target, look: Look) -> None:
    assert position_ask(target, look, Said(), now=100.0, every=30.0) is None


def test_the_answer_gives_the_position_in_the_queue_line() -> None:
    summary = {
        "items": [
            {
                "metadata": {"name": "job-train-3f2a1", "ownerReferences": [{"uid": "job-uid"}]},
                "positionInClusterQueue": 2,
            }
        ]
    }
    said = Said().answered(PositionAsked("", T0, "gpu"), summary)
    told = look_at(QUEUED_TARGET, Look(queued_job(), [], workloads=[PENDING]), said)
    assert told.lines[0].text == WAITING.replace("queue gpu", "queue gpu, position 3 (2 ahead)")
    assert told.said.pending == summary and told.said.asked == said.asked


# -- the diagnostics a final report asks for ------------------------------------------------------------


def test_a_failure_diagnoses_its_pods_and_the_deleted_ones_not_its_predecessors() -> None:
    look = Look(FAILED, [FAILED_POD], gone_pods=[DELETED_POD, PREDECESSORS_POD, FAILED_POD])
    told = look_at(TARGET, look)
    assert told.diagnose == Diagnose(FAILED, (FAILED_POD, DELETED_POD), every_pod=False)


@pytest.mark.parametrize(("wanted", "read"), [(50, 20), (5, 5), (0, 0)])
def test_last_lines_as_many_as_wanted_at_most_twenty(wanted: int, read: int) -> None:
    told = look_at(TARGET, Look(FAILED, [FAILED_POD]), lines=wanted)
    assert told.diagnose is not None and told.diagnose.lines == read and told.diagnose.warnings == 10
