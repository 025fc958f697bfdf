"""The hold after a deferral follows how late Airflow may report the deferring process's exit."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.triggers.workload import min_deferral_seconds

OPTION = "AIRFLOW__AIRFLOW_K8S_ML__MIN_DEFERRAL_SECONDS"
INTERVAL = "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL"


@pytest.mark.parametrize(
    ("option", "interval", "expected"),
    [
        ("", None, 7.0),  # unset: Airflow's default interval (5 s) plus two scheduler loops
        ("", "1", 3.0),  # a stack that shortens the interval waits less
        ("4.5", "1", 4.5),  # an explicit value wins
        ("0", None, 0.0),  # off
        ("soon", "2", 4.0),  # unreadable: as if unset
    ],
)
def test_min_deferral_seconds(
    monkeypatch: pytest.MonkeyPatch, option: str, interval: str | None, expected: float
) -> None:
    monkeypatch.setenv(OPTION, option)
    if interval is None:
        monkeypatch.delenv(INTERVAL, raising=False)
    else:
        monkeypatch.setenv(INTERVAL, interval)
    assert min_deferral_seconds() == expected
