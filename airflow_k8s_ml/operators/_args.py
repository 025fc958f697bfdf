"""Operator-argument helpers shared by the workload operators: pure, import-light.

Why: an operator validates its arguments twice - at DAG parse time for the static ones (a typo fails the DAG
import, not a 3 a.m. run) and in ``execute`` after templating (before any API call). Both passes must use the
same code. The templating helpers (:mod:`.templating`), the annotation (:mod:`.annotations`) and the one
duration converter (:func:`airflow_k8s_ml.deadlines.to_timedelta`) are re-exported here for the
operators; the sensors import them from those public modules.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from airflow.exceptions import AirflowProviderDeprecationWarning

from airflow_k8s_ml.deadlines import to_timedelta
from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.manifests.pod_fields import operator_arguments
from airflow_k8s_ml.manifests.validation import renamed_fields
from airflow_k8s_ml.operators.annotations import RESUMED_FROM_ANNOTATION
from airflow_k8s_ml.operators.templating import PLACEHOLDER, is_templated, neutralize

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
    "is_templated",
    "neutralize",
    "renamed_argument",
    "seconds_or_zero",
    "substitute_resume",
    "to_timedelta",
]

#: Written as an argument, replaced at launch with the resolved checkpoint URI ("" for a fresh start).
#: The operator puts this same string into the Jinja context, so Airflow renders it to itself.
RESUME_PLACEHOLDER = "{{ resume_from }}"
CHECKPOINT_URI_ENV = "CHECKPOINT_URI"
RESUME_FROM_ENV = "RESUME_FROM"
#: keep: leave the workload (default; logs and pods stay for debugging, TTL may still clean up);
#: delete_on_success: delete it after success only; delete: delete it after success and failure.
ON_FINISH = ("keep", "delete_on_success", "delete")

#: Operator argument -> PodTemplate field, for every pod argument a workload operator takes at the top level
#: (derived from the one declaration, :data:`~airflow_k8s_ml.manifests.pod_fields.POD_FIELDS`; the serving
#: operators take the subset marked ``serving``). Other fields go in ``pod_options``.
POD_ARGUMENTS: Mapping[str, str] = operator_arguments()
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


def check_on_finish(value: Any) -> str:
    if value not in ON_FINISH:
        raise ValidationError("on_finish", f"must be one of {', '.join(ON_FINISH)}; got {value!r}")
    return str(value)


def substitute_resume(args: Sequence[str] | None, resume_uri: str | None) -> list[str] | None:
    """Replace :data:`RESUME_PLACEHOLDER` in each argument with the resolved URI ("" when fresh)."""
    if args is None:
        return None
    if isinstance(args, str):
        return args  # type: ignore[return-value]  # a bare string: the spec's validation names the field
    uri = resume_uri or ""
    return [arg.replace(RESUME_PLACEHOLDER, uri) if isinstance(arg, str) else arg for arg in args]


def seconds_or_zero(value: Any, field: str) -> float:
    """A budget in seconds where 0 means "none" (``to_timedelta`` accepts only positive budgets)."""
    from datetime import timedelta

    if not isinstance(value, bool) and value in (0, "0", timedelta(0)):
        return 0.0
    budget = to_timedelta(value, field)
    return 0.0 if budget is None else budget.total_seconds()
