"""The smoke test's expectations, checked against a response. Pure: no HTTP here.

Why data instead of a callable: an operator argument must survive DAG serialization and templating, so the
check is a JSON-able description. ``expected_response`` is either

* a dict, matched as a *subset* of the JSON response (nested dicts recursively, lists element by element
  with equal length, scalars by equality). Keys starting with ``$`` are JSONPath-ish paths
  (``$.predictions[0]``, ``$.meta.model_uri``) whose value must match the same way; or
* a string or a list of strings: paths that must exist (``["$.predictions", "$.model_uri"]``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_k8s_ml.manifests.validation import check_int, fail

__all__ = ["SmokeOutcome", "check_response", "json_path", "validate_smoke_args"]


_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_REST = _NAME_START | frozenset("0123456789-")
_PREVIEW = 300


def _path_tokens(path: str, field_name: str = "expected_response") -> list[str | int]:
    if not path.startswith("$"):
        raise fail(field_name, f"path {path!r} must start with '$'")
    tokens: list[str | int] = []
    position = 1
    while position < len(path):
        step = _step(path, position)
        if step is None:
            raise fail(field_name, f"cannot parse path {path!r} at {path[position:]!r}")
        token, position = step
        tokens.append(token)
    return tokens


def _step(path: str, start: int) -> tuple[str | int, int] | None:
    """One step at ``start`` - ``.name``, ``[0]``, ``["key"]`` or ``['key']`` - and where the next begins.

    Read by hand rather than with a regular expression: the operators check ``expected_response`` when a DAG
    file is parsed, in a fresh dag-processor fork, where compiling one costs more than the whole check.
    """
    if path[start] == "." and path[start + 1 : start + 2] in _NAME_START:
        end = start + 2
        while end < len(path) and path[end] in _NAME_REST:
            end += 1
        return path[start + 1 : end], end
    if path[start] != "[":
        return None
    quote = path[start + 1 : start + 2]
    if quote in ('"', "'"):
        close = path.find(quote, start + 2)
        if close < 0 or path[close + 1 : close + 2] != "]":
            return None
        return path[start + 2 : close], close + 2
    close = path.find("]", start + 1)
    digits = path[start + 1 : close] if close > 0 else ""
    if not digits.isdecimal():
        return None
    return int(digits), close + 1


def json_path(document: Any, path: str) -> tuple[bool, Any]:
    """``(found, value)`` at ``path`` (``$``, ``.key``, ``[0]``, ``["key"]``)."""
    value = document
    for token in _path_tokens(path):
        in_list = isinstance(token, int) and isinstance(value, list) and token < len(value)
        in_map = isinstance(token, str) and isinstance(value, Mapping) and token in value
        if not (in_list or in_map):
            return False, None
        value = value[token]
    return True, value


def _subset_problems(expected: Any, actual: Any, where: str) -> list[str]:
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{where}: expected an object, got {_preview(actual)}"]
        problems: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{where}.{key}: missing")
            else:
                problems += _subset_problems(value, actual[key], f"{where}.{key}")
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected a list of {len(expected)}, got {_preview(actual)}"]
        problems = []
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            problems += _subset_problems(want, got, f"{where}[{index}]")
        return problems
    # bool is an int in Python: True must not match 1.
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        return [f"{where}: expected {json.dumps(expected)}, got {_preview(actual)}"]
    return []


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."


def validate_smoke_args(
    smoke_path: Any, smoke_request: Any, expected_response: Any, expected_status: Any
) -> None:
    """The operator's smoke arguments, checked before any API call (``ValidationError`` names the field)."""
    if smoke_path is not None and (not isinstance(smoke_path, str) or not smoke_path.startswith("/")):
        raise fail("smoke_path", f"must be an absolute URL path like '/predict', got {smoke_path!r}")
    if smoke_request is not None:
        if smoke_path is None:
            raise fail("smoke_path", "is required with smoke_request (where to POST it)")
        try:
            json.dumps(smoke_request)
        except (TypeError, ValueError) as exc:
            raise fail("smoke_request", f"must be JSON-serialisable: {exc}") from None
    if expected_response is not None:
        if smoke_path is None:
            raise fail("smoke_path", "is required with expected_response (what to call)")
        if isinstance(expected_response, str):
            _path_tokens(expected_response)
        elif isinstance(expected_response, Mapping):
            for key in expected_response:
                if not isinstance(key, str):
                    raise fail("expected_response", f"keys must be strings, got {key!r}")
                if key.startswith("$"):
                    _path_tokens(key)
        elif isinstance(expected_response, Sequence):
            for path in expected_response:
                if not isinstance(path, str):
                    raise fail("expected_response", f"paths must be strings, got {path!r}")
                _path_tokens(path)
        else:
            raise fail("expected_response", "must be a dict (subset) or JSONPath-ish path(s)")
    check_int(expected_status, "expected_status", minimum=100, maximum=599)


class SmokeOutcome:
    """One checked response: ``problems`` empty means it passed.

    (A plain class, not a dataclass: this module is imported on every DAG parse for
    :func:`validate_smoke_args`, and a dataclass costs code generation at import.)
    """

    __slots__ = ("body", "path", "problems", "status")

    def __init__(self, path: str, status: int, body: str, problems: list[str] | None = None) -> None:
        self.path = path
        self.status = status
        self.body = body
        self.problems: list[str] = list(problems or [])

    def __repr__(self) -> str:
        return f"SmokeOutcome(path={self.path!r}, status={self.status}, problems={self.problems!r})"

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_xcom(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "ok": self.ok, "body": _preview(self.body)}


def check_response(
    path: str, status: int, body: str, expected_status: int = 200, expected_response: Any = None
) -> SmokeOutcome:
    """Compare a response with the expectations; every mismatch is listed (not just the first)."""
    problems: list[str] = []
    if status != expected_status:
        problems.append(f"HTTP {status} (expected {expected_status}): {_preview(body)}")
    if expected_response is not None and not problems:
        try:
            document = json.loads(body)
        except ValueError:
            problems.append(f"response is not JSON: {_preview(body)}")
        else:
            problems += _expectation_problems(expected_response, document)
    return SmokeOutcome(path, status, body, problems)


def _expectation_problems(expected: Any, document: Any) -> list[str]:
    if isinstance(expected, str):
        expected = [expected]
    if not isinstance(expected, Mapping):
        return [f"{path}: missing" for path in expected if not json_path(document, path)[0]]
    problems: list[str] = []
    plain = {k: v for k, v in expected.items() if not k.startswith("$")}
    if plain:
        problems += _subset_problems(plain, document, "$")
    for path, want in expected.items():
        if path.startswith("$"):
            found, got = json_path(document, path)
            problems += _subset_problems(want, got, path) if found else [f"{path}: missing"]
    return problems
