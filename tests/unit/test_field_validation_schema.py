"""Every kind the local cluster serves has a field schema, so ``fieldValidation=Strict`` refuses an unknown
field on each of them (a kind without one would silently accept anything)."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.decoding import (
    check_fields,
    decode_body,
    validation_mode,
    warning_headers,
)
from airflow_k8s_ml.testbed.local_cluster.resources import RESOURCE_TYPES, ResourceType
from airflow_k8s_ml.testbed.local_cluster.schema import schema_for

#: Virtual rows (Kueue's visibility API) store nothing and accept no writes: there is no object to validate.
STORED = [rt for rt in RESOURCE_TYPES if not rt.virtual]


@pytest.mark.parametrize("rt", STORED, ids=lambda rt: f"{rt.api_version}/{rt.kind}")
def test_every_served_kind_refuses_an_unknown_field_under_strict(rt: ResourceType) -> None:
    assert schema_for(rt.api_version, rt.kind) is not None
    obj = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": "x", "bogusLabels": {}}}

    with pytest.raises(errors.StatusError) as refused:
        check_fields(obj, rt.api_version, rt.kind, "Strict", [])

    assert refused.value.code == 400
    assert refused.value.message == 'strict decoding error: unknown field "metadata.bogusLabels"'


def test_warn_is_the_default_and_ignore_is_silent() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dat": {}}

    pruned, warned = check_fields(obj, "v1", "ConfigMap", validation_mode(None, "POST"), [])
    _, ignored = check_fields(obj, "v1", "ConfigMap", "Ignore", [])

    assert "dat" not in pruned
    assert warned == ['unknown field "dat"'] and ignored == []
    assert warning_headers(warned) == {"Warning": '299 - "unknown field \\"dat\\""'}


def test_duplicates_are_named_by_path_and_the_last_wins() -> None:
    raw = b'{"a": 1, "b": {"c": [{"d": 1, "d": 2}], "c2": 0}, "a": 3}'

    decoded = decode_body(raw, "application/json")

    assert decoded.body == {"a": 3, "b": {"c": [{"d": 2}], "c2": 0}}
    assert decoded.duplicates == ["b.c[0].d", "a"]


def test_field_validation_is_spelled_exactly_or_refused_on_the_verbs_options() -> None:
    assert validation_mode(None, "POST") == "Warn" and validation_mode("Strict", "PATCH") == "Strict"

    with pytest.raises(errors.StatusError) as refused:
        validation_mode("strict", "PATCH")

    assert refused.value.code == 422
    assert refused.value.message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )
