"""Operator-argument helpers shared by the workload operators and the sensor: pure, import-light.

Why: an operator validates its arguments twice - at DAG parse time for the static ones (a typo fails the DAG
import, not a 3 a.m. run) and in ``execute`` after templating (before any API call). Both passes must use the
same code. Templated values cannot be checked at parse time, so :func:`neutralize` swaps every Jinja string
for a placeholder that passes validation, and the real value is checked once rendered.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.exceptions import AirflowProviderDeprecationWarning

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.validation import PLACEHOLDER, renamed_fields

__all__ = [
    "ARGUMENT_OF_FIELD",
    "CHECKPOINT_URI_ENV",
    "ON_FINISH",
    "PLACEHOLDER",
    "POD_ARGUMENTS",
    "RESUMED_FROM_ANNOTATION",
    "RESUME_FROM_ENV",
    "RESUME_PLACEHOLDER",
    "argument_names",
    "check_on_finish",
    "check_wait_args",
    "is_templated",
    "neutralize",
    "parse_deadline",
    "renamed_argument",
    "substitute_resume",
    "to_timedelta",
]

#: Written as an argument, replaced at launch with the resolved checkpoint URI ("" for a fresh start).
#: The operator puts this same string into the Jinja context, so Airflow renders it to itself.
RESUME_PLACEHOLDER = "{{ resume_from }}"
#: Annotation carrying the checkpoint an attempt resumed from, so a result can be rebuilt from the object.
RESUMED_FROM_ANNOTATION = "airflow-k8s-ml/resumed-from"
CHECKPOINT_URI_ENV = "CHECKPOINT_URI"
RESUME_FROM_ENV = "RESUME_FROM"
#: keep: leave the workload (default; logs and pods stay for debugging, TTL may still clean up);
#: delete_on_success: delete it after success only; delete: delete it after success and failure.
ON_FINISH = ("keep", "delete_on_success", "delete")

_JINJA = re.compile(r"{{|{%")

#: Operator argument -> PodTemplate field, for every pod argument an operator takes at the top level (the
#: training operators take all of these; the serving operators a subset). Other fields go in ``pod_options``.
POD_ARGUMENTS: Mapping[str, str] = {
    "image": "image",
    "command": "command",
    "args": "args",
    "env": "env",
    "secret_env": "secret_env",
    "env_from": "env_from_secrets",
    "requests": "requests",
    "limits": "limits",
    "gpus": "gpus",
    "gpu_resource": "gpu_resource",
    "node_selector": "node_selector",
    "tolerations": "tolerations",
    "image_pull_secrets": "image_pull_secrets",
    "volumes": "volumes",
    "service_account": "service_account",
    "scheduler_name": "scheduler_name",
    "pod_security_context": "pod_security_context",
    "container_security_context": "container_security_context",
    "shm_size": "shm_size",
}
#: PodTemplate field -> the operator argument that sets it, where the two names differ.
ARGUMENT_OF_FIELD: Mapping[str, str] = {field: arg for arg, field in POD_ARGUMENTS.items() if arg != field}


def argument_names() -> AbstractContextManager[None]:
    """Re-raise a ``ValidationError`` about a PodTemplate field under the name of the operator argument the
    user wrote (``env_from[0]``, not ``env_from_secrets[0]``)."""
    return renamed_fields(ARGUMENT_OF_FIELD)


def renamed_argument(new_name: str, new: Any, old_name: str, old: Any) -> Any:
    """The value of an argument that was renamed: the old name still works, with a deprecation warning;
    giving both is an error (which one would win is not obvious)."""
    if old is None:
        return new
    if new is not None:
        raise ValidationError(old_name, f"is the former name of {new_name}; pass only {new_name}")
    warnings.warn(
        f"{old_name} is deprecated; pass {new_name} (the same list of Secret names)",
        AirflowProviderDeprecationWarning,
        stacklevel=3,
    )
    return old


def is_templated(value: Any) -> bool:
    """Does ``value`` (or anything inside it) still hold Jinja that Airflow will render?"""
    if isinstance(value, str):
        return bool(_JINJA.search(value))
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(is_templated(v) for v in value)
    return False


def neutralize(value: Any, placeholder: str = PLACEHOLDER) -> Any:
    """A copy of ``value`` with every templated string replaced by ``placeholder``."""
    if isinstance(value, str):
        return placeholder if _JINJA.search(value) else value
    if isinstance(value, Mapping):
        return {k: neutralize(v, placeholder) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(neutralize(v, placeholder) for v in value)
    return value


def check_on_finish(value: Any) -> str:
    if value not in ON_FINISH:
        raise ValidationError("on_finish", f"must be one of {', '.join(ON_FINISH)}; got {value!r}")
    return str(value)


def to_timedelta(value: Any, field: str) -> timedelta | None:
    """A positive budget: a ``timedelta`` or a number of seconds; None means "no such deadline"."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError(field, f"must be a timedelta or a number of seconds, got {value!r}")
    if isinstance(value, str):
        # A rendered template (e.g. "{{ params.run_timeout_minutes * 60 }}") arrives as text.
        try:
            value = float(value.strip())
        except ValueError:
            raise ValidationError(
                field, f"must be a timedelta or a number of seconds, got {value!r}"
            ) from None
    if isinstance(value, int | float):
        value = timedelta(seconds=value)
    if not isinstance(value, timedelta):
        raise ValidationError(
            field, f"must be a timedelta or a number of seconds, got {type(value).__name__}"
        )
    if value <= timedelta(0):
        raise ValidationError(field, f"must be positive, got {value}")
    return value


def _aware(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC (Airflow's own convention for logical dates)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_deadline(value: Any, field: str = "deadline") -> tuple[timedelta | None, datetime | None]:
    """``deadline`` -> (overall budget from the attempt's start, absolute time); at most one is set.

    Accepts a ``timedelta`` (or seconds), a ``datetime``, or an ISO 8601 string - what a template such as
    ``{{ (logical_date + macros.timedelta(hours=6)).isoformat() }}`` renders to.
    """
    if value is None or value == "":
        return None, None
    if isinstance(value, datetime):
        return None, _aware(value)
    if isinstance(value, str):
        try:
            return None, _aware(datetime.fromisoformat(value.strip()))
        except ValueError:
            raise ValidationError(
                field, f"must be a timedelta, a datetime or an ISO 8601 time, got {value!r}"
            ) from None
    return to_timedelta(value, field), None


def check_wait_args(
    *,
    admission_timeout: Any,
    startup_timeout: Any,
    run_timeout: Any,
    deadline: Any,
    poll_interval: Any,
    log_lines: Any,
) -> None:
    """The waiting arguments of an operator or sensor, checked without building anything (parse time)."""
    for name, value in (
        ("admission_timeout", admission_timeout),
        ("startup_timeout", startup_timeout),
        ("run_timeout", run_timeout),
        ("poll_interval", poll_interval),
    ):
        if not is_templated(value):  # templated budgets are checked once rendered, before any API call
            to_timedelta(value, name)
    if not is_templated(deadline):
        parse_deadline(deadline)
    if isinstance(log_lines, bool) or not isinstance(log_lines, int) or log_lines < 0:
        raise ValidationError("log_lines", f"must be an integer >= 0, got {log_lines!r}")


def substitute_resume(args: Sequence[str] | None, resume_uri: str | None) -> list[str] | None:
    """Replace :data:`RESUME_PLACEHOLDER` in each argument with the resolved URI ("" when fresh)."""
    if args is None:
        return None
    if isinstance(args, str):
        return args  # type: ignore[return-value]  # a bare string: the spec's validation names the field
    uri = resume_uri or ""
    return [arg.replace(RESUME_PLACEHOLDER, uri) if isinstance(arg, str) else arg for arg in args]
