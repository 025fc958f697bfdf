"""Is an argument still a Jinja template? Shared by the operators and the sensors (pure, import-light).

Why: arguments are validated at DAG parse time for the static ones (a typo fails the DAG import, not a
3 a.m. run) and again in ``execute`` after templating. Templated values cannot be checked at parse time, so
:func:`neutralize` swaps every Jinja string for a placeholder that passes validation, and the real value is
checked once rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests.validation import PLACEHOLDER

__all__ = ["PLACEHOLDER", "is_templated", "neutralize"]


def _has_jinja(text: str) -> bool:
    """A Jinja expression or statement opener (two substring scans: no regular expression to compile in
    every dag-processor fork)."""
    return "{{" in text or "{%" in text


def is_templated(value: Any) -> bool:
    """Does ``value`` (or anything inside it) still hold Jinja that Airflow will render?"""
    if isinstance(value, str):
        return _has_jinja(value)
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(is_templated(v) for v in value)
    return False


def neutralize(value: Any, placeholder: str = PLACEHOLDER) -> Any:
    """A copy of ``value`` with every templated string replaced by ``placeholder``."""
    if isinstance(value, str):
        return placeholder if _has_jinja(value) else value
    if isinstance(value, Mapping):
        return {k: neutralize(v, placeholder) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(neutralize(v, placeholder) for v in value)
    return value
