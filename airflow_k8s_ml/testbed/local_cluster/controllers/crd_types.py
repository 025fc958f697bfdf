"""Type checks of a CRD's structural schema, as the apiserver reports them (422 Invalid, before any
webhook): ``<path>: Invalid value: "string": <path> in body must be of type integer: "string"``.

Shared by the custom kinds served natively (PyTorchJob, TrainJob, JobSet): their controllers read these
fields as numbers, booleans, lists and maps, so a value of another type must be refused at the door.
"""

from __future__ import annotations

from typing import Any

from .webhook import FieldError

_GO_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def type_error(path: str, value: Any, wanted: str) -> FieldError:
    got = _GO_TYPES.get(type(value), "null")
    return (
        path,
        "FieldValueTypeInvalid",
        f'Invalid value: "{got}": {path} in body must be of type {wanted}: "{got}"',
    )


def check_type(path: str, value: Any, wanted: str) -> list[FieldError]:
    """No error for an absent (None) value; else the value must be of the ``wanted`` OpenAPI type."""
    if value is None:
        return []
    ok = {
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }[wanted]
    return [] if ok else [type_error(path, value, wanted)]


def check_fields(obj: Any, base: str, wanted: dict[str, str]) -> list[FieldError]:
    """``check_type`` for each ``field: type`` of the mapping ``obj`` (nothing when it is not a mapping)."""
    if not isinstance(obj, dict):
        return []
    return [
        e for field, type_ in wanted.items() for e in check_type(f"{base}.{field}", obj.get(field), type_)
    ]
