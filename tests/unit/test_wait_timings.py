"""The waiting options (``[airflow_k8s_ml]``) are parsed once, by one rule, for both waits: the worker's
(:class:`~airflow_k8s_ml.triggers.sync_wait.WorkloadLooker`) and the triggerer's (``triggers/_waiter``).

The rule: a positive number is taken; anything else (0, a negative number, text, empty) reads as the
option's declared default. Before, the worker took 0 or a negative ``kueue_position_seconds`` as given (a
position ask on every look) while the triggerer refused it.
"""

from __future__ import annotations

import pytest

from airflow_k8s_ml.config import OPTIONS, WaitTimings
from airflow_k8s_ml.triggers import _waiter
from airflow_k8s_ml.triggers.sync_wait import WorkloadLooker

ENV = "AIRFLOW__AIRFLOW_K8S_ML__{}"
VALUES = [("3", 3.0), ("0.5", 0.5), ("0", None), ("-2", None), ("soon", None), ("", None), (" 7 ", 7.0)]


def worker_timings() -> WaitTimings:
    """What a sync wait (an operator with deferrable=False, a sensor's pokes) reads when it starts."""
    looker = WorkloadLooker(client=None, record=None, settings=None)  # type: ignore[arg-type]
    return looker.timings


def trigger_timings() -> WaitTimings:
    """What the triggerer's wait reads when it starts."""
    return _waiter.Timings.configured()


@pytest.mark.parametrize(("given", "read"), VALUES, ids=[repr(value) for value, _ in VALUES])
@pytest.mark.parametrize(
    ("option", "field"),
    [
        ("kueue_position_seconds", "position_refresh"),
        ("trigger_heartbeat_seconds", "heartbeat"),
        ("api_unreachable_timeout", "unreachable"),
    ],
)
def test_both_waits_accept_and_refuse_the_same_values(
    monkeypatch: pytest.MonkeyPatch, option: str, field: str, given: str, read: float | None
) -> None:
    monkeypatch.setenv(ENV.format(option.upper()), given)
    expected = float(OPTIONS[option].default) if read is None else read
    assert getattr(worker_timings(), field) == expected
    assert trigger_timings() == worker_timings()


def test_unset_options_read_as_their_declared_defaults() -> None:
    assert trigger_timings() == worker_timings() == WaitTimings()
    assert WaitTimings() == (60.0, 5.0, 10.0, 500, 200.0, 30.0, 900.0, 300.0, True, 120.0)
