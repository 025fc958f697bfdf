"""The disruptions annotation's codec (``triggers/disruption_ledger.py``): what a restarted trigger counts on
from, scoped to its try, and nothing from a value it cannot read."""

from __future__ import annotations

import json

from airflow_k8s_ml.status.disruption import Disruption
from airflow_k8s_ml.triggers.disruption_ledger import (
    DISRUPTIONS_ANNOTATION,
    encode_disruptions,
    read_disruptions,
)

TAKEN = (
    Disruption("u1", "train-a", "EvictionByEvictionAPI", "Eviction API: evicting", "2026-12-05T01:00:00Z"),
    Disruption(
        "u2", "train-b", "PreemptionByScheduler", "preempted", "2026-12-05T01:10:00Z", "2026-12-05T01:01Z"
    ),
)


def workload(value: str | None) -> dict[str, object]:
    return {"metadata": {"annotations": {DISRUPTIONS_ANNOTATION: value} if value is not None else {}}}


def test_a_wait_of_the_same_try_reads_back_every_disruption_with_its_uid() -> None:
    assert read_disruptions(workload(encode_disruptions(3, TAKEN)), 3) == TAKEN


def test_another_try_none_and_unreadable_values_count_nothing() -> None:
    stored = workload(encode_disruptions(3, TAKEN))
    assert read_disruptions(stored, 4) == ()  # a retry adopting the workload counts its own
    assert read_disruptions(stored, None) == ()
    assert read_disruptions(None, 3) == ()
    assert read_disruptions(workload(None), 3) == ()
    for bad in ("{", "[]", json.dumps({"try": 3}), json.dumps({"try": 3, "pods": [{"pod": "no-uid"}]})):
        assert read_disruptions(workload(bad), 3) == (), bad


def test_equal_disruptions_encode_to_equal_strings() -> None:
    assert encode_disruptions(1, TAKEN) == encode_disruptions(1, tuple(TAKEN))
    assert json.loads(encode_disruptions(1, TAKEN))["pods"][1]["uid"] == "u2"
