"""Metric rules such as ``{"val_accuracy": ">= 0.90", "loss": "< 0.5"}``: parse once, evaluate, explain.

Pure. Evaluation returns *every* failed rule with the value seen, because a gate that reports only the first
failure costs a second pipeline run to learn about the next one. A missing metric fails its rule.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from airflow_k8s_ml.errors import ValidationError

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_RULE_RE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class MetricRule:
    """``metric <op> threshold``; ``text`` keeps the user's spelling for messages."""

    metric: str
    op: str
    threshold: float

    @property
    def text(self) -> str:
        return f"{self.metric} {self.op} {self.threshold:g}"

    def check(self, metrics: Mapping[str, float]) -> str | None:
        """None if satisfied, else why not (with the value seen)."""
        if self.metric not in metrics:
            present = ", ".join(sorted(metrics)) or "none"
            return f"{self.text}: metric missing (checkpoint has: {present})"
        value = metrics[self.metric]
        if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
            return f"{self.text}: got {value!r}, not a number"
        if not _OPERATORS[self.op](float(value), self.threshold):
            return f"{self.text}: got {value:g}"
        return None


def parse_rules(rules: Mapping[str, str] | str | None, field: str = "metric_rules") -> list[MetricRule]:
    """Parse ``{"metric": "<op> <number>"}``; operators ``>= > <= < == !=``. Raises ValidationError.

    A JSON object in a string is accepted too, because a templated operator field renders to a string.
    """
    if rules is None:
        return []
    if isinstance(rules, str):
        try:
            rules = json.loads(rules)
        except ValueError as exc:
            raise ValidationError(field, f"not a JSON object of metric -> rule: {exc}") from exc
    if not isinstance(rules, Mapping):
        raise ValidationError(field, f"expected a mapping of metric -> rule, got {type(rules).__name__}")
    parsed: list[MetricRule] = []
    for metric, rule in rules.items():
        if not isinstance(metric, str) or not metric:
            raise ValidationError(field, f"metric names must be non-empty strings, got {metric!r}")
        match = _RULE_RE.match(rule) if isinstance(rule, str) else None
        if match is None:
            raise ValidationError(
                f"{field}.{metric}", f"expected '<op> <number>' with op in >= > <= < == !=, got {rule!r}"
            )
        parsed.append(MetricRule(metric, match.group(1), float(match.group(2))))
    return parsed


def evaluate(rules: list[MetricRule], metrics: Mapping[str, float]) -> list[str]:
    """Every failed rule, explained; empty when all pass."""
    return [failure for rule in rules if (failure := rule.check(metrics)) is not None]
