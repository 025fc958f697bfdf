"""What Kubernetes accepts as names, label keys and values, and annotations - checked before any API call.

The formats are apimachinery's (``k8s.io/apimachinery/pkg/util/validation``) and the per-kind name rules those
of the API server or the controller that owns the kind, so a bad name fails in Airflow with the argument named
instead of as a 422 from the cluster. Pure and import-light: operators check their static arguments with these
on every DAG parse. The names and labels *we* derive from a task instance are in
:mod:`~airflow_k8s_ml.manifests.naming`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.k8s.kinds import WORKLOAD_KINDS
from airflow_k8s_ml.k8s.names import (
    DNS1035_LABEL_MAX,
    DNS1123_LABEL_MAX,
    DNS1123_SUBDOMAIN_MAX,
    LABEL_VALUE_MAX,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
)
from airflow_k8s_ml.manifests.validation import check_non_empty_str, fail

__all__ = [
    "ANNOTATIONS_TOTAL_MAX",
    "LABEL_VALUE_MAX",
    "NAME_RULES",
    "NameRule",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_value",
    "is_qualified_name",
    "validate_annotations",
    "validate_dns1035_label",
    "validate_dns1123_label",
    "validate_dns1123_subdomain",
    "validate_label_key",
    "validate_label_value",
    "validate_labels",
    "validate_name",
    "validate_namespace",
]

# --- formats: the shared core's (k8s.io/apimachinery/pkg/util/validation) ------------------------------

ANNOTATIONS_TOTAL_MAX = 256 * 1024

_LABEL_HINT = (
    "must start and end with a lowercase letter or digit and contain only lowercase letters, digits, '-'"
)


def _check_length(value: str, maximum: int, field: str) -> None:
    if len(value) > maximum:
        raise fail(field, f"{value!r} is {len(value)} characters long; must be no more than {maximum}")


def validate_dns1123_label(value: Any, field: str, *, max_length: int = DNS1123_LABEL_MAX) -> str:
    """RFC 1123 label: namespaces, container names, port names, volume names."""
    text = check_non_empty_str(value, field)
    _check_length(text, min(max_length, DNS1123_LABEL_MAX), field)
    if not is_dns1123_label(text):
        raise fail(field, f"invalid name {text!r}: a lowercase RFC 1123 label {_LABEL_HINT}")
    return text


def validate_dns1123_subdomain(value: Any, field: str, *, max_length: int = DNS1123_SUBDOMAIN_MAX) -> str:
    """RFC 1123 subdomain: most object names (Job, CronJob, Deployment, ConfigMap, Secret, ...)."""
    text = check_non_empty_str(value, field)
    _check_length(text, min(max_length, DNS1123_SUBDOMAIN_MAX), field)
    if not is_dns1123_subdomain(text):
        raise fail(field, f"invalid name {text!r}: a lowercase RFC 1123 subdomain {_LABEL_HINT} or '.'")
    return text


def validate_dns1035_label(value: Any, field: str, *, max_length: int = DNS1035_LABEL_MAX) -> str:
    """RFC 1035 label: Services (their name becomes a DNS name) and PyTorchJobs (whose pods get Services)."""
    text = check_non_empty_str(value, field)
    _check_length(text, min(max_length, DNS1035_LABEL_MAX), field)
    if not is_dns1035_label(text):
        raise fail(
            field,
            f"invalid name {text!r}: an RFC 1035 label must start with a lowercase letter, end with a "
            "lowercase letter or digit and contain only lowercase letters, digits and '-'",
        )
    return text


def validate_namespace(value: Any, field: str = "namespace") -> str:
    return validate_dns1123_label(value, field)


# --- per-kind name rules ---------------------------------------------------------------------------------


class NameRule:
    """What one kind's ``metadata.name`` must be: a DNS-1035 label (else a DNS-1123 subdomain), and how long.

    (A plain class: this module is imported on every DAG parse, and a dataclass costs code generation.)
    """

    __slots__ = ("dns1035", "max_length")

    def __init__(self, *, dns1035: bool, max_length: int) -> None:
        self.dns1035 = dns1035
        self.max_length = max_length


#: What the API server (or the controller that owns the kind) accepts as ``metadata.name``: the workload
#: kinds' rules come from :data:`~airflow_k8s_ml.k8s.kinds.WORKLOAD_KINDS` (which says why each);
#: Service: DNS-1035, it becomes a DNS name.
NAME_RULES: dict[str, NameRule] = {
    **{k.kind: NameRule(dns1035=k.dns1035, max_length=k.name_max) for k in WORKLOAD_KINDS},
    "Service": NameRule(dns1035=True, max_length=63),
    "HorizontalPodAutoscaler": NameRule(dns1035=False, max_length=253),
    "PodDisruptionBudget": NameRule(dns1035=False, max_length=253),
    "NetworkPolicy": NameRule(dns1035=False, max_length=253),
}


def validate_name(kind: str, value: Any, field: str = "name", *, max_length: int | None = None) -> str:
    """Validate ``metadata.name`` for ``kind`` the way the API server (or controller) would."""
    rule = NAME_RULES.get(kind, NameRule(dns1035=False, max_length=253))
    limit = rule.max_length if max_length is None else min(max_length, rule.max_length)
    if rule.dns1035:
        return validate_dns1035_label(value, field, max_length=limit)
    return validate_dns1123_subdomain(value, field, max_length=limit)


# --- labels and annotations ------------------------------------------------------------------------------


def validate_label_key(key: Any, field: str) -> str:
    """``[prefix/]name``: prefix a DNS subdomain (<= 253), name a qualified name (<= 63)."""
    if not isinstance(key, str) or not key:
        raise fail(field, f"label/annotation key must be a non-empty string, got {key!r}")
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        raise fail(field, f"invalid key {key!r}: prefix {prefix!r} must be a DNS-1123 subdomain")
    if not is_qualified_name(name):
        raise fail(
            field,
            f"invalid key {key!r}: name part must be at most 63 characters of [A-Za-z0-9._-] "
            "starting and ending with an alphanumeric character",
        )
    return key


def validate_label_value(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise fail(field, f"label value must be a string, got {value!r}")
    if not is_label_value(value):
        raise fail(
            field,
            f"invalid label value {value!r}: at most 63 characters of [A-Za-z0-9._-], starting and ending "
            "with an alphanumeric character (use sanitize_label_value)",
        )
    return value


def validate_labels(labels: Any, field: str = "labels") -> dict[str, str]:
    if not isinstance(labels, Mapping):
        raise fail(field, f"must be a mapping, got {type(labels).__name__}")
    out: dict[str, str] = {}
    for key, value in labels.items():
        validate_label_key(key, f"{field}[{key}]")
        out[key] = validate_label_value(value, f"{field}[{key}]")
    return out


def validate_annotations(annotations: Any, field: str = "annotations") -> dict[str, str]:
    if not isinstance(annotations, Mapping):
        raise fail(field, f"must be a mapping, got {type(annotations).__name__}")
    out: dict[str, str] = {}
    total = 0
    for key, value in annotations.items():
        validate_label_key(key, f"{field}[{key}]")
        if not isinstance(value, str):
            raise fail(f"{field}[{key}]", f"annotation value must be a string, got {value!r}")
        total += len(key) + len(value)
        out[key] = value
    if total > ANNOTATIONS_TOTAL_MAX:
        raise fail(field, f"total size {total} bytes exceeds {ANNOTATIONS_TOTAL_MAX}")
    return out
