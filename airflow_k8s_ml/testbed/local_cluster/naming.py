"""Object name rules: which of apimachinery's name formats (:mod:`airflow_k8s_ml.k8s.names`) the apiserver
applies to ``metadata.name``, as each kind's row in :mod:`.resources` declares it (``name_format``)."""

from __future__ import annotations

from collections.abc import Callable

from airflow_k8s_ml.k8s.names import dns1035_label_errors, dns1123_label_errors, dns1123_subdomain_errors

from .resources import ResourceType

_FORMATS: dict[str, Callable[[str], list[str]]] = {
    "subdomain": dns1123_subdomain_errors,
    "label": dns1123_label_errors,
    "dns1035": dns1035_label_errors,
}


def validate_object_name(rt: ResourceType, name: str) -> str | None:
    """The first problem with ``name`` for this kind (upstream reports the length first), or None."""
    errs = _FORMATS[rt.name_format](name)
    return errs[0] if errs else None
