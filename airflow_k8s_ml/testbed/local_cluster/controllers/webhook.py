"""How the apiserver answers when a validating admission webhook denies a request.

controller-runtime turns a validator's error (a ``field.ErrorList`` aggregate) into ``admission.Denied``;
the apiserver answers 403 Forbidden with ``admission webhook "<name>" denied the request: <errors>``. The
aggregate reads like ``utilerrors.Aggregate``: one error alone, several in ``[a, b]``. The field errors are
also attached as ``details.causes`` (a real denial carries none) so tools can show them.
"""

from __future__ import annotations

import json
from typing import Any

from .. import errors

# A field error as field.Error renders it: (path, reason for the Status cause, message after "<path>: ").
FieldError = tuple[str, str, str]


def render(problem: FieldError) -> str:
    path, _, message = problem
    return f"{path}: {message}" if path else message


def denial(
    webhook: str, group: str, plural: str, name: str, problems: list[FieldError]
) -> errors.StatusError:
    rendered = [render(p) for p in problems]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    causes = [{"reason": reason, "message": message, "field": path} for path, reason, message in problems]
    return errors.StatusError(
        403,
        "Forbidden",
        f'admission webhook "{webhook}" denied the request: {summary}',
        {"name": name, "group": group, "kind": plural, "causes": causes},
    )


def invalid(path: str, value: str, detail: str) -> FieldError:
    """``field.Invalid``: ``<path>: Invalid value: <value>: <detail>`` (value already rendered)."""
    return (path, "FieldValueInvalid", f"Invalid value: {value}: {detail}")


def plain(message: str) -> FieldError:
    """A plain ``error`` in the aggregate (``fmt.Errorf``): rendered without a field path."""
    return ("", "FieldValueInvalid", message)


def render_value(value: Any) -> str:
    """A struct or list value in a ``field.Invalid`` message (compact JSON; Go prints its own form)."""
    return json.dumps(value, separators=(",", ":"))
