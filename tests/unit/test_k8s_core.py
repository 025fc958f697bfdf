"""The shared core agrees with itself on both sides: one message, whoever asks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s import cron, names, quantities
from airflow_k8s_ml.k8s.selectors import format_label_selector, parse_label_selector
from airflow_k8s_ml.manifests.cron import parse_schedule
from airflow_k8s_ml.manifests.quantities import parse_quantity


@pytest.mark.parametrize(
    ("text", "value"), [("500m", Decimal("0.5")), ("2Gi", Decimal(2**31)), ("1u", Decimal("1e-6"))]
)
def test_one_quantity_grammar(text: str, value: Decimal) -> None:
    assert quantities.parse(text) == value == parse_quantity(text)


def test_a_bad_quantity_names_upstreams_pattern_on_both_sides() -> None:
    with pytest.raises(quantities.QuantityError) as core:
        quantities.parse("2GB")
    with pytest.raises(ValidationError) as ours:
        parse_quantity("2GB", "memory")
    assert (
        quantities.QUANTITY_PATTERN in str(core.value) and quantities.QUANTITY_PATTERN in ours.value.message
    )


def test_schedule_errors_are_robfigs_on_both_sides() -> None:
    with pytest.raises(cron.ScheduleError) as core:
        cron.parse_standard("61 * * * *")
    with pytest.raises(ValidationError) as ours:
        parse_schedule("61 * * * *")
    assert str(core.value) == ours.value.message == "end of range (61) above maximum (59): 61"


def test_time_zone_rules() -> None:
    assert cron.time_zone_error("Europe/Berlin") is None
    assert cron.time_zone_error("Local") is not None and cron.time_zone_error("") is not None


def test_schedule_next_in_zone() -> None:
    schedule = cron.parse_standard("0 9 * * *")
    after = datetime(2030, 1, 7, 0, tzinfo=UTC).astimezone(cron.load_location("Europe/Berlin"))
    assert schedule.next(after) == datetime(2030, 1, 7, 8, tzinfo=UTC)


def test_names_give_upstream_messages() -> None:
    assert names.dns1123_label_errors("Bad_Name") == [names.LABEL_MSG]
    assert names.dns1035_label_errors("1abc") == [names.DNS1035_MSG]
    assert names.dns1123_subdomain_errors("a" * 254)[0] == "must be no more than 253 characters"
    assert names.is_qualified_name("app") and not names.is_label_value("-x")


def test_label_selector_round_trip() -> None:
    text = format_label_selector({"app": "web", "tier": "db"})
    assert text == "app=web,tier=db"
    assert parse_label_selector(text).matches({"app": "web", "tier": "db", "x": "y"})


def _samples() -> list[str]:
    """Every string up to three characters over an alphabet covering each character class the name rules
    distinguish, plus long and Unicode cases."""
    import itertools

    alphabet = "aZ0-._/é \n"
    short = ["".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)]
    return [*short, "a" * 63, "a" * 64, "a.b-c.d", "-a", "a-", "a..b", "x\n", "ẞ", "a_b", "A.b_C-9"]


@pytest.mark.parametrize(
    ("predicate", "fmt", "limit"),
    [
        (names.is_dns1123_label, names._DNS1123_LABEL_FMT, names.DNS1123_LABEL_MAX),
        (names.is_dns1123_subdomain, names._DNS1123_SUBDOMAIN_FMT, names.DNS1123_SUBDOMAIN_MAX),
        (names.is_dns1035_label, names._DNS1035_LABEL_FMT, names.DNS1035_LABEL_MAX),
        (names.is_qualified_name, names._QUALIFIED_NAME_FMT, names.QUALIFIED_NAME_MAX),
        (names.is_label_value, names._LABEL_VALUE_FMT, names.LABEL_VALUE_MAX),
        (names.is_env_var_name, names._ENV_VAR_NAME_FMT, None),
    ],
)
def test_name_matchers_accept_exactly_what_upstreams_regex_accepts(
    predicate: Callable[[str], bool], fmt: str, limit: int | None
) -> None:
    """The matchers avoid compiling regular expressions at parse time; the formats upstream's messages quote
    stay the specification."""
    import re

    for value in _samples():
        expected = bool(re.fullmatch(fmt, value)) and (limit is None or len(value) <= limit)
        assert predicate(value) is expected, value


def test_quantity_reader_accepts_exactly_what_upstreams_grammar_accepts() -> None:
    """The reader avoids compiling a regular expression at parse time; this grammar stays the spec."""
    import itertools
    import re

    grammar = re.compile(
        r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
        r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
    )
    alphabet = "1.+-eEKiM "
    samples = ["".join(p) for n in range(5) for p in itertools.product(alphabet, repeat=n)]
    for text in [*samples, "2Gi", "500m", "1e3", "1E", ".5", "5.", "2GB", "1Ki1", "0x10"]:
        match = grammar.match(text.strip())
        expected = None if match is None else Decimal(match.group("number"))
        got = quantities.try_parse(text)
        if expected is None:
            assert got is None, text
        else:
            assert got is not None, text
