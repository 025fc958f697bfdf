"""Small checks that raise :class:`~airflow_k8s_ml.errors.ValidationError` naming the offending field.

Why a module of its own: every spec validates the same kinds of values (non-negative integers, one of a set of
strings, string-to-string maps). Keeping the checks here gives every error the same wording and guarantees
that ``field`` is always set, so an operator can tell the user *which* argument is wrong before any API call.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.names import is_env_var_name

__all__ = [
    "PLACEHOLDER",
    "ValidationError",
    "check_bool",
    "check_choice",
    "check_env_name",
    "check_int",
    "check_mapping",
    "check_non_empty_str",
    "check_optional_int",
    "check_port",
    "check_str_map",
    "check_str_sequence",
    "checked_options",
    "fail",
    "renamed_fields",
    "require",
    "store_checked",
    "with_defaults",
]

#: What a templated string stands for during parse-time validation: valid as an image, a name, a label
#: value and an environment value, so only the *other* arguments are judged before rendering. Defined here,
#: beside the checks, because a raw manifest's rules (:mod:`~airflow_k8s_ml.manifests.raw`) must also leave
#: a value that is still a template to be judged once rendered.
PLACEHOLDER = "templated"



def fail(field: str, message: str) -> ValidationError:
    """Build the error (callers ``raise fail(...)`` so type checkers see the raise)."""
    return ValidationError(field, message)


def _renamed(field: str, names: Mapping[str, str]) -> str | None:
    for old, new in names.items():
        if field == old or field.startswith((f"{old}.", f"{old}[")):
            return new + field[len(old) :]
    return None


@contextmanager
def renamed_fields(names: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a ``ValidationError`` about field ``old`` (or inside it: ``old[k]``, ``old.x``) under
    ``names[old]``: a rule written for one name (a spec field) reports the name the user wrote (an operator
    argument, a manifest path)."""
    try:
        yield
    except ValidationError as exc:
        field = _renamed(exc.field, names)
        if field is None:
            raise
        raise ValidationError(field, exc.message) from None


def with_defaults(
    values: Mapping[str, Any], defaults: Mapping[str, Any], required: Iterable[str] = ()
) -> dict[str, Any]:
    """A rules function's input: every field, defaults filled in; a key that is no field is named."""
    known = {*defaults, *required}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValidationError(unknown[0], "is not an argument of this workload")
    return {**defaults, **values}


def store_checked(spec: object, checked: Mapping[str, Any]) -> None:
    """Store a rules function's normalised values on a frozen dataclass spec (in its ``__post_init__``)."""
    for name, value in checked.items():
        object.__setattr__(spec, name, value)


def require(condition: bool, field: str, message: str) -> None:
    """Raise ``ValidationError(field, message)`` unless ``condition`` holds."""
    if not condition:
        raise ValidationError(field, message)


def check_non_empty_str(value: Any, field: str) -> str:
    """A non-blank string (an image, a URI, a secret name)."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(field, f"must be a non-empty string, got {value!r}")
    return value


def check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, f"must be true or false, got {value!r}")
    return value


def check_int(value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer within bounds. ``bool`` is rejected: ``True`` is an int in Python but never a count."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValidationError(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValidationError(field, f"must be <= {maximum}, got {value}")
    return value


def check_optional_int(
    value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None
) -> int | None:
    """Like :func:`check_int` but ``None`` (meaning "leave the Kubernetes default") passes."""
    if value is None:
        return None
    return check_int(value, field, minimum=minimum, maximum=maximum)


def check_choice(value: Any, choices: Collection[str], field: str) -> str:
    """One of a closed set of strings; the message lists the choices so the fix is obvious."""
    if value not in choices:
        allowed = ", ".join(sorted(choices))
        raise ValidationError(field, f"must be one of {allowed}; got {value!r}")
    return str(value)


def check_port(value: Any, field: str) -> int:
    return check_int(value, field, minimum=1, maximum=65535)


def check_mapping(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(field, f"must be a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str) or not key:
            raise ValidationError(field, f"keys must be non-empty strings, got {key!r}")
    return value


def check_str_map(value: Any, field: str) -> dict[str, str]:
    """A ``{str: str}`` mapping, copied (so later mutation by the caller cannot change a frozen spec)."""
    mapping = check_mapping(value, field)
    out: dict[str, str] = {}
    for key, item in mapping.items():
        if not isinstance(item, str):
            raise ValidationError(f"{field}[{key}]", f"must be a string, got {item!r}")
        out[key] = item
    return out


def check_str_sequence(value: Any, field: str, *, allow_empty_items: bool = True) -> tuple[str, ...]:
    """A list/tuple of strings. A bare string is refused: ``command="python train.py"`` is a classic slip."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValidationError(field, f"must be a list of strings, got {value!r}")
    items = tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise ValidationError(f"{field}[{index}]", f"must be a string, got {item!r}")
        if not allow_empty_items and not item:
            raise ValidationError(f"{field}[{index}]", "must not be empty")
    return items


def check_env_name(name: Any, field: str) -> str:
    if not isinstance(name, str) or not is_env_var_name(name):
        raise ValidationError(
            field, f"invalid environment variable name {name!r}: must match [-._a-zA-Z][-._a-zA-Z0-9]*"
        )
    return name


def checked_options(
    value: Any, allowed: Collection[str], field: str, *, arguments: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A copy of an ``*_options`` mapping (``pod_options``, ``deployment_options``) whose keys are all
    fields in ``allowed``; else the error naming the key as a field (``pod_options.colour``) and either the
    top-level argument that sets it (``arguments``: argument -> field) or the fields allowed."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(field, f"must be a mapping, got {type(value).__name__}")
    by_field = {target: name for name, target in (arguments or {}).items()}
    for key in value:
        if key in allowed:
            continue
        if key in by_field:
            raise fail(f"{field}.{key}", f"set by the {by_field[key]!r} argument, not {field}")
        raise fail(f"{field}.{key}", f"unknown option; expected one of {', '.join(sorted(allowed))}")
    return dict(value)

