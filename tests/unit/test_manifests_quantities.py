from __future__ import annotations

from decimal import Decimal

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.quantities import (
    format_quantity,
    is_extended_resource,
    is_integer_quantity,
    parse_quantity,
    validate_resource_name,
    validate_resources,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        ("1.5", Decimal("1.5")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("512Mi", Decimal(512 * 1024**2)),
        ("1Ki", Decimal(1024)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("1E", Decimal(10**18)),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("+1", Decimal(1)),
        ("0", Decimal(0)),
        (2, Decimal(2)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse_quantity(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["500m", "2Gi", "1e3", "1.5", "100Mi", "1E", "0.1", "3"])
def test_agrees_with_kubernetes_client(text):
    from kubernetes.utils import parse_quantity as k8s_parse

    assert parse_quantity(text) == k8s_parse(text)


@pytest.mark.parametrize(
    "text", ["2GB", "1ki", "1K", "abc", "", " 1", "1 ", "1e", "1.2.3", "Gi", "--1", "1Gi1", "0x10"]
)
def test_invalid_quantities_name_the_field(text):
    with pytest.raises(ValidationError) as info:
        parse_quantity(text, "requests[memory]")
    assert info.value.field == "requests[memory]"


@pytest.mark.parametrize("value", [True, None, float("nan"), float("inf"), [1]])
def test_format_quantity_rejects_non_quantities(value):
    with pytest.raises(ValidationError):
        format_quantity(value, "cpu")


def test_format_quantity():
    assert format_quantity(2) == "2"
    assert format_quantity(0.5) == "0.5"
    assert format_quantity(1e-05) == "0.00001"
    assert format_quantity("250m") == "250m"


def test_integer_quantity():
    assert is_integer_quantity("2000m")
    assert is_integer_quantity("1e1")
    assert not is_integer_quantity("500m")
    assert not is_integer_quantity("junk")


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/mig-1g.5gb", True),
        ("amd.com/gpu", True),
        ("cpu", False),
        ("kubernetes.io/foo", False),
        ("x.kubernetes.io/foo", False),
    ],
)
def test_is_extended_resource(name, extended):
    assert is_extended_resource(name) is extended


@pytest.mark.parametrize("name", ["gpu", "kubernetes.io/gpu", "Bad_Domain/x", "nvidia.com/", ""])
def test_unknown_resource_names(name):
    with pytest.raises(ValidationError):
        validate_resource_name(name, "limits")


def test_validate_resources_ok():
    req, lim = validate_resources(
        {"cpu": 2, "memory": "8Gi", "nvidia.com/gpu": 1},
        {"memory": "8Gi", "nvidia.com/gpu": "1", "nvidia.com/mig-1g.5gb": 2},
    )
    assert req == {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}
    assert lim["nvidia.com/mig-1g.5gb"] == "2"


@pytest.mark.parametrize(
    ("requests", "limits", "field", "match"),
    [
        ({"nvidia.com/gpu": "0.5"}, {"nvidia.com/gpu": "0.5"}, "requests[nvidia.com/gpu]", "whole number"),
        ({}, {"nvidia.com/mig-1g.5gb": "500m"}, "limits[nvidia.com/mig-1g.5gb]", "whole number"),
        ({"nvidia.com/gpu": 1}, {}, "requests[nvidia.com/gpu]", "must be equal to nvidia.com/gpu limit"),
        ({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2}, "requests[nvidia.com/gpu]", "must be equal"),
        ({"cpu": "2"}, {"cpu": "1"}, "requests[cpu]", "less than or equal to cpu limit of 1"),
        ({"memory": "-1Gi"}, {}, "requests[memory]", "greater than or equal to 0"),
        ({"memory": "2GB"}, {}, "requests[memory]", "invalid quantity"),
        ({"gpu": 1}, {}, "requests[gpu]", "unknown resource"),
        ("2", {}, "requests", "mapping"),
    ],
)
def test_validate_resources_errors(requests, limits, field, match):
    with pytest.raises(ValidationError, match=match) as info:
        validate_resources(requests, limits)
    assert info.value.field == field
