"""Kubernetes resource quantities ("500m", "2Gi", "1e3") and container resource requirements.

Why parse them ourselves: a typo like ``memory="2GB"`` or ``nvidia.com/gpu=0.5`` should fail at DAG parse time
with the argument's name, not as a 422 from the API server after the task started (or, worse, as a Job that
never schedules). The grammar and the rules (extended resources are integers and request == limit; request
<= limit) follow ``k8s.io/apimachinery/pkg/api/resource`` and the core validation of ResourceRequirements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from airflow_k8s_ml.k8s import quantities
from airflow_k8s_ml.k8s.quantities import is_extended_resource
from airflow_k8s_ml.manifests.formats import is_dns1123_subdomain, is_qualified_name
from airflow_k8s_ml.manifests.validation import fail

__all__ = [
    "GPU_RESOURCE",
    "Quantity",
    "format_quantity",
    "is_extended_resource",
    "is_integer_quantity",
    "parse_quantity",
    "validate_resource_name",
    "validate_resources",
]

#: The value types a user may pass: ``"500m"``, ``2``, ``0.5``.
Quantity = str | int | float

GPU_RESOURCE = "nvidia.com/gpu"

_QUANTITY_HINT = (
    f"quantities must match the regular expression '{quantities.QUANTITY_PATTERN}' "
    "(e.g. '500m', '2Gi', '1.5', '1e3')"
)
_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


def format_quantity(value: Any, field: str = "quantity") -> str:
    """The string form we put in manifests; ints and floats are accepted for convenience (``cpu=2``)."""
    if isinstance(value, bool):
        raise fail(field, f"invalid quantity {value!r}: expected a string like '500m' or '2Gi' or a number")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise fail(field, f"invalid quantity {value!r}: must be finite")
        text = format(Decimal(repr(value)), "f")
    elif isinstance(value, str):
        text = value
    else:
        raise fail(field, f"invalid quantity {value!r}: expected a string like '500m' or '2Gi' or a number")
    parse_quantity(text, field)
    return text


def parse_quantity(value: Any, field: str = "quantity") -> Decimal:
    """The exact numeric value (cores, bytes, devices) as a ``Decimal``, for comparisons.

    ``"500m"`` -> 0.5, ``"2Gi"`` -> 2147483648, ``"1e3"`` -> 1000, ``"1E"`` -> 10**18 (exa, not an exponent).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = format_quantity(value, field)
    if not isinstance(value, str):
        raise fail(field, f"invalid quantity {value!r}: expected a string like '500m' or '2Gi'")
    if value != value.strip():
        raise fail(field, f"invalid quantity {value!r}: {_QUANTITY_HINT}")
    try:
        return quantities.parse(value)
    except quantities.QuantityError:
        raise fail(field, f"invalid quantity {value!r}: {_QUANTITY_HINT}") from None


def is_integer_quantity(value: Any) -> bool:
    """True when the quantity is a whole number (``"2"``, ``"2000m"``, ``"1e1"``); False on invalid input."""
    try:
        number = parse_quantity(value)
    except ValueError:
        return False
    return number == number.to_integral_value()


def validate_resource_name(name: Any, field: str) -> str:
    """Container resources: cpu, memory, ephemeral-storage, hugepages-<size>, or a vendor resource."""
    if not isinstance(name, str) or not name:
        raise fail(field, f"resource name must be a non-empty string, got {name!r}")
    if name in _STANDARD_CONTAINER_RESOURCES or name.startswith("hugepages-"):
        return name
    prefix, slash, rest = name.partition("/")
    if not slash or not is_extended_resource(name):
        raise fail(
            field,
            f"unknown resource {name!r}: use cpu, memory, ephemeral-storage, hugepages-<size> or a "
            "vendor resource such as nvidia.com/gpu",
        )
    if not is_dns1123_subdomain(prefix) or not is_qualified_name(rest):
        raise fail(field, f"invalid resource name {name!r}")
    return name


def _canonical_map(values: Any, field: str) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise fail(field, f"must be a mapping of resource name to quantity, got {type(values).__name__}")
    out: dict[str, str] = {}
    for name, quantity in values.items():
        item = f"{field}[{name}]"
        validate_resource_name(name, item)
        text = format_quantity(quantity, item)
        number = parse_quantity(text, item)
        if number < 0:
            raise fail(item, f"must be greater than or equal to 0, got {text!r}")
        if is_extended_resource(name) and number != number.to_integral_value():
            raise fail(item, f"{name} must be a whole number (fractional GPUs do not exist), got {text!r}")
        out[name] = text
    return out


def validate_resources(
    requests: Mapping[str, Any] | None, limits: Mapping[str, Any] | None, *, field_prefix: str = ""
) -> tuple[dict[str, str], dict[str, str]]:
    """Validate requests/limits as the API server does; returns them as ``{name: quantity string}``.

    Rules: quantities parse and are >= 0; extended resources (GPUs) are integers and, when requested, have an
    equal limit (the scheduler cannot overcommit devices); every request is <= its limit. Error fields are
    ``<field_prefix>requests[<name>]`` / ``<field_prefix>limits[<name>]``.
    """
    req = _canonical_map(requests, f"{field_prefix}requests")
    lim = _canonical_map(limits, f"{field_prefix}limits")
    for name, text in req.items():
        item = f"{field_prefix}requests[{name}]"
        if is_extended_resource(name):
            if name not in lim or parse_quantity(text) != parse_quantity(lim[name]):
                raise fail(item, f"must be equal to {name} limit of {lim.get(name, '0')}")
        elif name in lim and parse_quantity(text) > parse_quantity(lim[name]):
            raise fail(item, f"must be less than or equal to {name} limit of {lim[name]}")
    return req, lim
