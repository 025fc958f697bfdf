"""Resource quantities ("500m", "2Gi", "1e3") as exact decimals, for scheduling and the downward API.

The local cluster imports nothing from the rest of the package (layering), so it carries this small
parser of its own; the grammar is apimachinery's ``resource.ParseQuantity``.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """Raised with the apiserver's message, so validation can put it in a 422 cause as is."""


def parse(value: object) -> Decimal:
    """The exact value of a quantity; ints and floats (JSON numbers) are accepted like the apiserver does."""
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
        return number * (2 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def try_parse(value: object) -> Decimal | None:
    try:
        return parse(value)
    except QuantityError:
        return None


def ceil_div(value: Decimal, divisor: Decimal) -> int:
    """``resourceFieldRef`` rounds up (convertResourceCPUToString / Memory use ceil)."""
    return math.ceil(value / divisor) if divisor else 0


def format_plain(value: Decimal) -> str:
    """Integers without exponent or trailing zeros (the form capacity and allocatable are shown in)."""
    if value == value.to_integral_value():
        return str(int(value))
    if (value * 1000) == (value * 1000).to_integral_value():
        return f"{int(value * 1000)}m"
    return format(value.normalize(), "f")
