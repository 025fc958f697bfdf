"""Resource quantities ("500m", "2Gi", "1e3") as exact decimals: apimachinery's ``resource.ParseQuantity``.

One parser for both sides: the operators refuse ``memory="2GB"`` at DAG parse time
(``manifests.quantities``), the local cluster schedules pods, fills the downward API and answers 422 with the
apiserver's message. Values compare as :class:`~decimal.Decimal`; :func:`format_plain` is the canonical
short form capacity and allocatable are shown in. Pure, stdlib only.
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["QUANTITY_PATTERN", "QuantityError", "format_plain", "is_extended_resource", "parse", "try_parse"]

#: The regular expression upstream's error message quotes.
QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# <signedNumber><suffix>; suffix is binarySI | decimalSI | decimalExponent (Go's parseQuantityString).
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """Raised with the apiserver's message, so validation can put it in a 422 cause as is."""


def parse(value: object) -> Decimal:
    """The exact value of a quantity: ``"500m"`` -> 0.5, ``"2Gi"`` -> 2147483648, ``"1E"`` -> 10**18.

    JSON numbers are accepted as the apiserver accepts them; surrounding blanks are dropped as its JSON
    decoding does.
    """
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    if isinstance(value, int | float):
        return Decimal(repr(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    number = Decimal(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return number * Decimal(2) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def try_parse(value: object) -> Decimal | None:
    """The value, or None when it is not a quantity."""
    try:
        return parse(value)
    except QuantityError:
        return None


def format_plain(value: Decimal) -> str:
    """Integers without exponent or trailing zeros (the form capacity and allocatable are shown in)."""
    if value == value.to_integral_value():
        return str(int(value))
    if (value * 1000) == (value * 1000).to_integral_value():
        return f"{int(value * 1000)}m"
    return format(value.normalize(), "f")


def is_extended_resource(name: str) -> bool:
    """``IsExtendedResourceName``: a vendor resource such as ``nvidia.com/gpu`` (a domain-prefixed name
    outside ``kubernetes.io``, not a ``requests.`` quota name); such resources are whole numbers and cannot
    be overcommitted (request equals limit)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
