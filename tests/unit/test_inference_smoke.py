"""Smoke-test expectations: subset matching, JSONPath-ish keys, argument validation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators._smoke import check_response, json_path, validate_smoke_args

BODY = json.dumps({"predictions": [3, 7], "model_uri": "file:///m/step-1/", "step": 1, "meta": {"ok": True}})


def test_dict_subset_and_paths_pass() -> None:
    outcome = check_response(
        "/predict",
        200,
        BODY,
        expected_response={"model_uri": "file:///m/step-1/", "$.predictions[1]": 7, "$.meta": {"ok": True}},
    )
    assert outcome.ok and outcome.to_xcom()["status"] == 200


def test_every_mismatch_is_listed() -> None:
    outcome = check_response(
        "/predict",
        200,
        BODY,
        expected_response={"model_uri": "file:///m/step-2/", "step": True, "$.predictions[5]": 1, "x": 1},
    )
    assert outcome.problems == [
        '$.model_uri: expected "file:///m/step-2/", got file:///m/step-1/',
        "$.step: expected true, got 1",
        "$.x: missing",
        "$.predictions[5]: missing",
    ]


def test_path_list_status_and_non_json() -> None:
    assert check_response("/p", 200, BODY, expected_response=["$.predictions", "$.step"]).ok
    assert check_response("/p", 200, BODY, expected_response="$.nope").problems == ["$.nope: missing"]
    wrong = check_response("/p", 503, '{"status": "loading"}', expected_response={"a": 1})
    assert wrong.problems == ['HTTP 503 (expected 200): {"status": "loading"}']
    assert check_response("/p", 200, "hello", expected_response={"a": 1}).problems == [
        "response is not JSON: hello"
    ]
    lists = check_response("/p", 200, BODY, expected_response={"predictions": [3]})
    assert lists.problems == ["$.predictions: expected a list of 1, got [3, 7]"]


def test_json_path_tokens() -> None:
    doc = {"a": {"b c": [{"d": 1}]}}
    assert json_path(doc, '$.a["b c"][0].d') == (True, 1)
    assert json_path(doc, "$") == (True, doc)
    assert json_path(doc, "$.a.x") == (False, None)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("predict", None, None, 200), "smoke_path"),
        ((None, {"instances": []}, None, 200), "smoke_path"),
        ((None, None, {"a": 1}, 200), "smoke_path"),
        (("/p", {"x": object()}, None, 200), "smoke_request"),
        (("/p", None, "a.b", 200), "expected_response"),
        (("/p", None, {"$.a[": 1}, 200), "expected_response"),
        (("/p", None, 42, 200), "expected_response"),
        (("/p", None, None, 99), "expected_status"),
    ],
)
def test_bad_smoke_arguments_name_the_field(args: tuple, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_smoke_args(*args)
    assert info.value.field == field


def test_path_reader_reads_exactly_the_documented_grammar() -> None:
    """Read by hand (no regex compiled at parse time); this grammar stays the specification."""
    import itertools
    import re

    step = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]|\['([^']*)'\]")

    def expected(path: str) -> list[str | int] | None:
        tokens: list[str | int] = []
        position = 1
        while position < len(path):
            match = step.match(path, position)
            if match is None:
                return None
            name, index, dq, sq = match.groups()
            tokens.append(int(index) if index is not None else (name or dq or sq or ""))
            position = match.end()
        return tokens

    for chars in (p for n in range(6) for p in itertools.product(".[]\"'a1_-", repeat=n)):
        path = "$" + "".join(chars)
        want = expected(path)
        if want is None:
            with pytest.raises(ValidationError, match="cannot parse path"):
                validate_smoke_args("/p", None, [path], 200)
        else:
            assert json_path(_nested(want), path) == (True, "leaf"), path


def _nested(tokens: list[str | int]) -> Any:
    """A document in which ``tokens`` lead to the value ``"leaf"``."""
    value: Any = "leaf"
    for token in reversed(tokens):
        value = [None] * token + [value] if isinstance(token, int) else {token: value}
    return value
