"""Operator-argument helpers (pure): templating detection, placeholders, deadlines, resume substitution."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators._args import (
    PLACEHOLDER,
    RESUME_PLACEHOLDER,
    check_on_finish,
    check_wait_args,
    is_templated,
    neutralize,
    parse_deadline,
    substitute_resume,
    to_timedelta,
)


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


def test_parse_deadline_relative_absolute_and_iso() -> None:
    assert parse_deadline(timedelta(hours=6)) == (timedelta(hours=6), None)
    assert parse_deadline(3600) == (timedelta(hours=1), None)
    aware = datetime(2024, 5, 1, 6, tzinfo=UTC)
    assert parse_deadline(aware) == (None, aware)
    assert parse_deadline(datetime(2024, 5, 1, 6)) == (None, aware)  # naive = UTC
    assert parse_deadline("2024-05-01T06:00:00+00:00") == (None, aware)
    assert parse_deadline(None) == parse_deadline("") == (None, None)
    with pytest.raises(ValidationError, match="ISO 8601") as info:
        parse_deadline("tomorrow")
    assert info.value.field == "deadline"


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
