"""Operator-argument helpers (pure): templating detection, placeholders, deadlines, resume substitution."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_k8s_ml.deadlines import DEFAULT_STARTUP_TIMEOUT, Deadlines
from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators._args import (
    PLACEHOLDER,
    RESUME_PLACEHOLDER,
    check_on_finish,
    is_templated,
    neutralize,
    substitute_resume,
    to_timedelta,
)
from airflow_k8s_ml.operators.wait_settings import WaitSettings, check_wait_args


def test_is_templated_looks_inside_containers() -> None:
    assert is_templated("{{ ds }}") and is_templated("{% if x %}y{% endif %}")
    assert is_templated(["a", {"k": ("{{ params.x }}",)}])
    assert not is_templated(["a", {"k": 1}, None, timedelta(1)])


def test_neutralize_replaces_only_templated_strings() -> None:
    value = {"image": "{{ var.value.img }}", "args": ["--lr", "{{ params.lr }}"], "gpus": 1}
    assert neutralize(value) == {"image": PLACEHOLDER, "args": ["--lr", PLACEHOLDER], "gpus": 1}
    assert neutralize(("a", "{{ b }}")) == ("a", PLACEHOLDER)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (90, timedelta(seconds=90)),
        (1.5, timedelta(seconds=1.5)),
        (timedelta(hours=1), timedelta(hours=1)),
    ],
)
def test_to_timedelta_accepts_seconds_and_timedeltas(value: object, expected: timedelta | None) -> None:
    assert to_timedelta(value, "run_timeout") == expected


@pytest.mark.parametrize("value", [0, -1, timedelta(0), True, "30m", [1]])
def test_to_timedelta_rejects_non_positive_and_other_types(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        to_timedelta(value, "run_timeout")
    assert info.value.field == "run_timeout"


def test_deadline_relative_absolute_and_iso() -> None:
    assert Deadlines.parse(deadline=timedelta(hours=6)).deadline == timedelta(hours=6)
    assert Deadlines.parse(deadline=3600).deadline == timedelta(hours=1)
    aware = datetime(2024, 5, 1, 6, tzinfo=UTC)
    assert Deadlines.parse(deadline=aware).deadline == aware
    assert Deadlines.parse(deadline=datetime(2024, 5, 1, 6)).deadline == aware  # naive = UTC
    assert Deadlines.parse(deadline="2024-05-01T06:00:00+00:00").deadline == aware
    assert Deadlines.parse(deadline=None) == Deadlines.parse(deadline="") == Deadlines()
    with pytest.raises(ValidationError, match="ISO 8601") as info:
        Deadlines.parse(deadline="tomorrow")
    assert info.value.field == "deadline"


def test_wait_settings_parse_once_and_skip_templates_at_parse_time() -> None:
    args = {
        "admission_timeout": "{{ params.a }}",
        "startup_timeout": None,
        "run_timeout": "{{ params.r }}",
        "deadline": PLACEHOLDER,
        "poll_interval": 5,
        "log_lines": 50,
    }
    check_wait_args(**args)  # templated: judged once rendered
    rendered = {**args, "admission_timeout": "60", "run_timeout": 7200, "deadline": "2024-05-01T06:00:00Z"}
    settings = WaitSettings.build(kubernetes_conn_id="k", stream_logs=True, **rendered)
    assert settings.deadlines == Deadlines(
        admission_timeout=timedelta(minutes=1),
        startup_timeout=DEFAULT_STARTUP_TIMEOUT,  # not set: the default budget, at run time only
        run_timeout=timedelta(hours=2),
        deadline=datetime(2024, 5, 1, 6, tzinfo=UTC),
    )
    assert settings.poll_interval == 5.0
    with pytest.raises(ValidationError) as info:  # not rendered at execute time: an error, not "no limit"
        WaitSettings.build(kubernetes_conn_id="k", stream_logs=True, **args)
    assert info.value.field == "admission_timeout"


def test_substitute_resume() -> None:
    args = ["--resume-from", RESUME_PLACEHOLDER, f"--ckpt={RESUME_PLACEHOLDER}"]
    assert substitute_resume(args, "s3://b/step-2/") == [
        "--resume-from",
        "s3://b/step-2/",
        "--ckpt=s3://b/step-2/",
    ]
    assert substitute_resume(args, None) == ["--resume-from", "", "--ckpt="]
    assert substitute_resume(None, "x") is None


def test_check_on_finish_and_wait_args() -> None:
    assert check_on_finish("delete_on_success") == "delete_on_success"
    with pytest.raises(ValidationError) as info:
        check_on_finish("purge")
    assert info.value.field == "on_finish"
    check_wait_args(
        admission_timeout=60,
        startup_timeout=None,
        run_timeout=timedelta(hours=1),
        deadline=None,
        poll_interval=5,
        log_lines=50,
    )
    for name, bad in (("startup_timeout", -5), ("poll_interval", 0), ("log_lines", -1), ("deadline", "soon")):
        kwargs = {
            "admission_timeout": None,
            "startup_timeout": None,
            "run_timeout": None,
            "deadline": None,
            "poll_interval": 30,
            "log_lines": 50,
            name: bad,
        }
        with pytest.raises(ValidationError) as info:
            check_wait_args(**kwargs)
        assert info.value.field == name
