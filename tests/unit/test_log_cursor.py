"""The persisted log cursor (pure parts): scoped to one try, the furthest position wins, garbage is ignored;
and a failure report does not print relayed lines a second time."""

from __future__ import annotations

import json

from airflow_k8s_ml.operators.outcome import event_report
from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.triggers.log_cursor import CURSOR_ANNOTATION, encode_cursor, merge_cursors, read_cursor

T1 = "2024-05-01T10:00:01.5Z"
T2 = "2024-05-01T10:00:02.000000001Z"


def annotated(value: str) -> dict:
    return {"metadata": {"annotations": {CURSOR_ANNOTATION: value}}}


def test_the_cursor_of_the_same_try_is_read_back() -> None:
    streams = {"master-0": {"ts": T1, "n": 2}, "worker-0": {"ts": T2, "n": 1}}
    obj = annotated(encode_cursor(3, streams))
    assert read_cursor(obj, 3) == streams
    assert json.loads(obj["metadata"]["annotations"][CURSOR_ANNOTATION])["try"] == 3


def test_another_try_or_no_try_starts_from_the_beginning() -> None:
    obj = annotated(encode_cursor(1, {"ft-abc": {"ts": T1, "n": 1}}))
    assert read_cursor(obj, 2) == {}  # an adopting retry relays the whole log into its own try's log
    assert read_cursor(obj, None) == {}
    assert read_cursor({"metadata": {}}, 1) == {}


def test_unreadable_values_are_ignored() -> None:
    for raw in ("not json", "[]", '{"try": 1, "streams": []}', '{"try": 1, "streams": {"a": {"ts": "x"}}}'):
        assert read_cursor(annotated(raw), 1) == {}


def test_merge_keeps_the_furthest_position_per_stream() -> None:
    kwargs = {"a": {"ts": T1, "n": 1}, "b": {"ts": T2, "n": 1}}
    persisted = {"a": {"ts": T1, "n": 3}, "b": {"ts": T1, "n": 9}, "c": {"ts": T1, "n": 1}}
    assert merge_cursors(kwargs, persisted, None) == {
        "a": {"ts": T1, "n": 3},
        "b": {"ts": T2, "n": 1},
        "c": {"ts": T1, "n": 1},
    }


def test_relayed_lines_are_not_printed_again() -> None:
    pods = [
        {"replica": "ft-a", "pod": "ft-a", "exit_code": 3, "last_lines": ["boom"], "relayed": True},
        {"replica": "ft-b", "pod": "ft-b", "exit_code": 1, "last_lines": ["other"]},
    ]
    text = event_report("Job ml/ft", WorkloadState("failed", reason="BackoffLimitExceeded"), pods, [])
    assert "boom" not in text and "(its last lines are in the log above)" in text
    assert "  | other" in text
