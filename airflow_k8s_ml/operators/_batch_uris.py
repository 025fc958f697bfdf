"""The three URIs of a batch-inference run (Job or CronJob form), checked the same way for both.

Why a module of its own: :class:`~airflow_k8s_ml.operators.batch_inference.BatchInferenceCronJobOperator`
checks them when a DAG file is parsed, and importing :mod:`~airflow_k8s_ml.operators.batch_job` for that
would define the Job operator class (and its kind) in every dag-processor fork that never uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.operators.templating import PLACEHOLDER, is_templated

__all__ = ["URI_ENV", "check_batch_uri", "check_batch_uris", "check_static_scheme", "uri_text"]

#: Operator argument -> env var of the pod (the same names the CronJob form injects).
URI_ENV: dict[str, str] = {"model_uri": "MODEL_URI", "input_uri": "INPUT_URI", "output_uri": "OUTPUT_URI"}
_SCHEMES = ("s3://", "file://")
_EXPECTED = "must be an s3://bucket/prefix or file:///abs/path URI"


def uri_text(value: Any, field: str) -> str | None:
    """The URI a (possibly rendered) argument holds, or None while it is unresolved (a Jinja placeholder or
    an XComArg at parse time). ``model_uri`` may be the checkpoint gate's XCom ``{"uri", "step", ...}``."""
    if isinstance(value, Mapping) and field == "model_uri":
        value = value.get("uri")
    if value == PLACEHOLDER:
        return None
    if hasattr(value, "resolve") and not isinstance(value, str | Mapping):
        return None  # an XComArg: Airflow resolves it when the task renders its fields
    if not isinstance(value, str) or not value.strip():
        gate = " or the checkpoint gate's XCom with a 'uri'" if field == "model_uri" else ""
        raise ValidationError(field, f"{_EXPECTED}{gate}, got {value!r}")
    return value.strip()


def check_batch_uri(value: Any, field: str) -> str | None:
    """A batch URI checked as the pod will read it: ``s3://bucket[/prefix]`` or ``file:///abs/path``.

    Bare paths are refused (unlike checkpoint URIs): the workload needs a scheme to pick its storage, and a
    path means different things on the Airflow worker and in the pod. Returns the URI, or None while the
    value is still a template.
    """
    text = uri_text(value, field)
    if text is None:
        return None
    if not text.startswith(_SCHEMES):
        raise ValidationError(field, f"{_EXPECTED}, got {text!r}")
    from airflow_k8s_ml.checkpoints.uri import parse_uri

    parse_uri(text, field)  # a bucket-less s3:// or a relative/'..' file path is named here
    return text


def check_batch_uris(values: Mapping[str, Any]) -> dict[str, str | None]:
    """The three URIs of a batch run (Job or CronJob form), each by :func:`check_batch_uri`, and
    ``output_uri`` distinct from ``input_uri``. Templated ones (None) wait until they are rendered."""
    uris = {field: check_batch_uri(values[field], field) for field in URI_ENV}
    if uris["input_uri"] is not None and uris["output_uri"] is not None:
        from airflow_k8s_ml.checkpoints.uri import parse_uri

        if parse_uri(uris["input_uri"]).uri == parse_uri(uris["output_uri"]).uri:
            raise ValidationError(
                "output_uri",
                f"must differ from input_uri ({uris['input_uri']!r}): the predictions would be read as "
                "input by the next run",
            )
    return uris


def check_static_scheme(value: Any, field: str) -> None:
    """Parse time, for a templated URI: its literal start, when it already names a scheme, must be ours.

    ``s3://b/predictions/{{ ds_nodash }}/`` passes; ``gs://b/{{ ds }}/`` fails at DAG import rather than at
    the first run. A template that starts with Jinja (``{{ var.value.out }}``) waits for ``execute``.
    """
    if not (isinstance(value, str) and is_templated(value)):
        return
    head = value.strip().split("{{", 1)[0].split("{%", 1)[0]
    if "://" in head and not head.startswith(_SCHEMES):
        raise ValidationError(field, f"{_EXPECTED}, got {value!r}")
