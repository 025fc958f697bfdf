"""PyTorchJob condition bookkeeping, with the training operator's quirks (pkg/util/status.go)."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.pytorchjob.conditions import (
    FAILED,
    RESTARTING,
    RUNNING,
    SUCCEEDED,
    is_finished,
    reason,
    set_condition,
)

T0 = 1_700_000_000.0


def types(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in status["conditions"]]


def test_running_and_restarting_remove_each_other() -> None:
    status: dict[str, Any] = {}
    set_condition(status, "Created", "True", reason("Created"), "created", T0)
    set_condition(status, RUNNING, "True", reason("Running"), "running", T0)
    set_condition(status, RESTARTING, "True", reason("Restarting"), "restarting", T0 + 1)
    assert types(status) == [("Created", "True"), ("Restarting", "True")]
    set_condition(status, RUNNING, "True", reason("Running"), "running", T0 + 2)
    assert types(status) == [("Created", "True"), ("Running", "True")]


def test_success_turns_running_false_and_keeps_its_reason() -> None:
    status: dict[str, Any] = {}
    set_condition(status, RUNNING, "True", reason("Running"), "running", T0)
    set_condition(status, SUCCEEDED, "True", reason("Succeeded"), "done", T0 + 5)
    running = status["conditions"][0]
    assert (running["status"], running["reason"], running["lastTransitionTime"]) == (
        "False",
        "PyTorchJobRunning",
        "2023-11-14T22:13:20Z",
    )
    assert is_finished(status)


def test_failed_is_sticky() -> None:
    status: dict[str, Any] = {}
    set_condition(status, FAILED, "True", reason("Failed"), "boom", T0)
    assert not set_condition(status, RUNNING, "True", reason("Running"), "running", T0 + 1)
    assert not set_condition(status, SUCCEEDED, "True", reason("Succeeded"), "done", T0 + 1)
    assert types(status) == [("Failed", "True")]


def test_same_status_and_reason_keeps_the_first_message() -> None:
    status: dict[str, Any] = {}
    set_condition(status, RESTARTING, "True", reason("Restarting"), "first", T0)
    assert not set_condition(status, RESTARTING, "True", reason("Restarting"), "second", T0 + 1)
    assert status["conditions"][0]["message"] == "first"


def test_a_new_reason_with_the_same_status_keeps_the_transition_time() -> None:
    status: dict[str, Any] = {}
    set_condition(status, RUNNING, "False", reason("Running"), "was running", T0)
    set_condition(status, RUNNING, "False", reason("Suspended"), "suspended", T0 + 60)
    running = status["conditions"][0]
    assert running["reason"] == "PyTorchJobSuspended"
    assert (running["lastTransitionTime"], running["lastUpdateTime"]) == (
        "2023-11-14T22:13:20Z",
        "2023-11-14T22:14:20Z",
    )
