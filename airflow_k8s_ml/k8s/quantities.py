"""Resource quantities ("500m", "2Gi", "1e3") as exact decimals: apimachinery's ``resource.ParseQuantity``.

One parser for both sides: the operators refuse ``memory="2GB"`` at DAG parse time
(``manifests.quantities``), the local cluster schedules pods, fills the downward API and answers 422 with the
apiserver's message. Values compare as :class:`~decimal.Decimal`; :func:`format_plain` is the canonical
short form capacity and allocatable are shown in. Pure, stdlib only.
"""

from __future__ import annotations

from decimal import Decimal

__all__ = ["QUANTITY_PATTERN", "QuantityError", "format_plain", "is_extended_resource", "parse", "try_parse"]

#: The regular expression upstream's error message quotes.
QUANTITY_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# <signedNumber><suffix>; suffix is binarySI | decimalSI | decimalExponent (Go's parseQuantityString):
# ^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?P<suffix>Ki|Mi|...|E|[eE][+-]?[0-9]+)?$, read by
# :func:`_split` without a regular expression (this module is imported on every DAG parse, in a fresh
# dag-processor fork, where compiling one costs more than all the quantities of a DAG).
_DIGITS = frozenset("0123456789")
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
    parts = _split(str(value).strip())
    if parts is None:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    number, suffix = Decimal(parts[0]), parts[1]
    if suffix in _BINARY:
        return number * Decimal(2) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def _split(text: str) -> tuple[str, str] | None:
    """``(number, suffix)`` of a quantity's text, or None when it is not one."""
    end = 1 if text.startswith(("+", "-")) else 0
    start = end
    while end < len(text) and text[end] in _DIGITS:
        end += 1
    whole = end - start
    fraction = 0
    if end < len(text) and text[end] == ".":
        end += 1
        while end < len(text) and text[end] in _DIGITS:
            end += 1
            fraction += 1
    if not whole and not fraction:
        return None
    suffix = text[end:]
    if suffix in _BINARY or suffix in _DECIMAL or _is_exponent(suffix):
        return text[:end], suffix
    return None


def _is_exponent(suffix: str) -> bool:
    """``[eE][+-]?[0-9]+``."""
    if suffix[:1] not in ("e", "E"):
        return False
    digits = suffix[2:] if suffix[1:2] in ("+", "-") else suffix[1:]
    return bool(digits) and all(char in _DIGITS for char in digits)


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
