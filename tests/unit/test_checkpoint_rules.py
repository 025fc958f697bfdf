"""Metric rules: every operator, strict parsing, and failures that show the value seen."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.checkpoints.rules import evaluate, parse_rules
from airflow_k8s_ml.errors import ValidationError


@pytest.mark.parametrize(
    ("rule", "value", "passes"),
    [
        (">= 0.90", 0.90, True),
        (">= 0.90", 0.89, False),
        ("> 1", 1.0, False),
        ("<= -1e-3", -0.001, True),
        ("< .5", 0.49, True),
        ("== 3", 3.0, True),
        ("!= 3", 3.0, False),
        ("  >=1  ", 2.0, True),
    ],
)
def test_operators(rule: str, value: float, passes: bool) -> None:
    assert (evaluate(parse_rules({"m": rule}), {"m": value}) == []) is passes


def test_every_failed_rule_is_reported_with_the_value_seen() -> None:
    rules = parse_rules({"val_accuracy": ">= 0.90", "loss": "< 0.5", "f1": "> 0.7", "auc": ">= 0.5"})
    failures = evaluate(rules, {"val_accuracy": 0.85, "loss": 0.7, "auc": 0.9})
    assert failures == [
        "val_accuracy >= 0.9: got 0.85",
        "loss < 0.5: got 0.7",
        "f1 > 0.7: metric missing (checkpoint has: auc, loss, val_accuracy)",
    ]


def test_nan_fails_every_rule_even_not_equal() -> None:
    assert evaluate(parse_rules({"loss": "!= 1"}), {"loss": float("nan")}) == [
        "loss != 1: got nan, not a number"
    ]


@pytest.mark.parametrize("bad", ["0.9", ">= high", "=> 0.9", "~ 1", 0.9, None])
def test_bad_rules_are_validation_errors_naming_the_metric(bad) -> None:
    with pytest.raises(ValidationError) as info:
        parse_rules({"val_accuracy": bad})
    assert info.value.field == "metric_rules.val_accuracy"


def test_none_means_no_rules() -> None:
    assert parse_rules(None) == []


def test_a_rendered_template_string_is_parsed_as_json() -> None:
    assert parse_rules('{"loss": "< 0.5"}')[0].threshold == 0.5
    with pytest.raises(ValidationError):
        parse_rules("loss < 0.5")
