"""Object name rules per kind: which of apimachinery's name formats (:mod:`airflow_k8s_ml.k8s.names`) the
apiserver applies to ``metadata.name`` of each resource."""

from __future__ import annotations

from airflow_k8s_ml.k8s.names import dns1035_label_errors, dns1123_label_errors, dns1123_subdomain_errors

from .resources import ResourceType

# Kinds whose names must be DNS labels (they become hostnames or label values). CronJobs are not among
# them: upstream validates them as subdomains (ValidateReplicationControllerName) and then limits them to
# 52 characters in the CronJob admission.
_LABEL_KINDS = {"namespaces", "deployments"}
# Custom resources (pytorchjobs) get the apiserver's DNS-1123 subdomain rule; the training operator's
# webhook then applies its own DNS-1035 rule with its own message (the pytorchjob admission).
_DNS1035_KINDS = {"services"}


def validate_object_name(rt: ResourceType, name: str) -> str | None:
    """The first problem with ``name`` for this kind (upstream reports the length first), or None."""
    if rt.plural in _DNS1035_KINDS:
        errs = dns1035_label_errors(name)
    elif rt.plural in _LABEL_KINDS:
        errs = dns1123_label_errors(name)
    else:
        errs = dns1123_subdomain_errors(name)
    return errs[0] if errs else None
