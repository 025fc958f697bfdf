"""Reading ``status.conditions`` the same way everywhere (missing status, missing list, string booleans)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = status_of(obj).get("conditions")
    if not isinstance(items, list):
        return []
    return [c for c in items if isinstance(c, Mapping)]


def find(obj: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """The condition of that type (the API keeps at most one per type), or None."""
    for condition in conditions(obj):
        if condition.get("type") == condition_type:
            return condition
    return None


def is_true(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def count(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
