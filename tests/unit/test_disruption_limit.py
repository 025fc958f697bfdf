"""The disruption budget (``max_disruptions``) and the disruption figures, decided once for both waits:
``status.wait_report.report`` counts each disrupted pod once across looks, ends the wait past the limit with
the count in the message, and the finish's ``status.disruption.summary`` measures the time lost. Pure: looks
in, reports out."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators import FineTuneJobOperator
from airflow_k8s_ml.status.disruption import Disruption, count_text, lost_seconds, summary
from airflow_k8s_ml.status.wait_report import Look, Said, report
from tests.unit.test_status_wait import RUNNING, SUCCEEDED, T0, TARGET


def disrupted(
    name: str, uid: str, reason: str = "EvictionByEvictionAPI", at: str = "2023-11-14T22:20:00Z"
) -> Any:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "ownerReferences": [{"kind": "Job", "name": "ft", "uid": "u1", "controller": True}],
        },
        "spec": {"containers": [{"name": "main"}]},
        "status": {
            "phase": "Failed",
            "startTime": "2023-11-14T22:15:00Z",
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": reason,
                    "message": "Eviction API: evicting",
                    "lastTransitionTime": at,
                }
            ],
        },
    }


def look_all(looks: list[Look], limit: int | None, obj: Any = RUNNING) -> tuple[Any, list[str]]:
    said, lines, told = Said(), [], None
    for n, look in enumerate(looks):
        told = report(TARGET, look, said, now=T0 + n, deadlines=Deadlines(max_disruptions=limit))
        said = told.said
        lines += [line.text for line in told.lines]
    return told, lines


def test_each_disrupted_pod_counts_once_across_looks_and_the_limit_itself_is_survived() -> None:
    a, b = disrupted("ft-a", "pa"), disrupted("ft-b", "pb")
    told, lines = look_all(
        [Look(RUNNING, [a]), Look(RUNNING, [a]), Look(RUNNING, [b], gone_pods=[a])], limit=2
    )
    assert told.decision.verdict == "wait"
    assert [d.pod for d in told.said.disrupted] == ["ft-a", "ft-b"]
    assert sum("disrupted: EvictionByEvictionAPI" in text for text in lines) == 2


def test_past_the_limit_the_wait_ends_as_a_budget_with_the_count_and_the_pods_in_its_message() -> None:
    pods = [disrupted(f"ft-{n}", f"p{n}") for n in range(3)]
    told, lines = look_all([Look(RUNNING, pods[:1]), Look(RUNNING, pods[1:])], limit=2)
    decision = told.decision
    assert decision.verdict == "deadline" and decision.expired == "max_disruptions"
    assert "Job ml/ft evicted 3 times in this attempt, over max_disruptions 2" in decision.message
    assert "ft-0 (EvictionByEvictionAPI), ft-1 (EvictionByEvictionAPI), ft-2" in decision.message
    assert lines[-1].endswith(decision.message)
    assert told.diagnose is not None  # the pods are diagnosed before the workload is deleted


def test_a_mix_of_reasons_is_counted_by_kind() -> None:
    pods = [
        disrupted("ft-0", "p0"),
        disrupted("ft-1", "p1", "PreemptionByScheduler"),
        disrupted("ft-2", "p2", "TerminationByKubelet"),
    ]
    told, _ = look_all([Look(RUNNING, pods)], limit=0)
    assert "disrupted 3 times (2 evicted, 1 preempted)" in told.decision.message


def test_no_limit_and_a_finished_workload_are_never_failed_by_the_count() -> None:
    pods = [disrupted(f"ft-{n}", f"p{n}") for n in range(8)]
    assert look_all([Look(RUNNING, pods)], limit=None)[0].decision.verdict == "wait"
    assert look_all([Look(SUCCEEDED, pods)], limit=1)[0].decision.verdict == "succeeded"


def test_the_limit_travels_in_the_trigger_payload_and_bad_values_name_the_argument() -> None:
    deadlines = Deadlines.parse(run_timeout=60, max_disruptions=3)
    assert Deadlines.from_payload(deadlines.to_payload()) == deadlines
    assert "max_disruptions" not in Deadlines.parse(run_timeout=60).to_payload()  # older payload shape
    for bad in (-1, 1.5, "many", True):
        with pytest.raises(ValidationError, match="max_disruptions"):
            Deadlines.parse(max_disruptions=bad)
    with pytest.raises(ValidationError, match="max_disruptions"):
        FineTuneJobOperator(task_id="t", image="python:3.11", max_disruptions=-2)


def test_lost_time_counts_from_the_later_of_the_pod_start_and_the_last_checkpoint_before_it() -> None:
    d = Disruption(
        "u", "ft-a", "EvictionByEvictionAPI", "", at="2023-11-14T22:20:00Z", started="2023-11-14T22:15:00Z"
    )
    assert lost_seconds(d) == 300.0
    checkpoints = ["2023-11-14T22:10:00Z", "2023-11-14T22:18:30Z", "2023-11-14T22:21:00Z"]
    assert lost_seconds(d, checkpoints) == 90.0  # only the one committed by this pod before it was taken
    assert lost_seconds(Disruption("u", "ft-b", "x", "")) is None
    figures = summary([d, Disruption("v", "ft-b", "PreemptionByScheduler", "")], checkpoints)
    assert figures["count"] == 2 and figures["lost_seconds"] == 90.0
    assert [p["lost_seconds"] for p in figures["pods"]] == [90.0, None]
    assert summary([]) == {"count": 0, "lost_seconds": None, "pods": []}
    assert count_text([d]) == "evicted 1 time"
