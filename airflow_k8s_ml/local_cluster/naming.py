"""Object name rules per kind (apimachinery validation: DNS-1123 subdomain, label, or DNS-1035)."""

from __future__ import annotations

import re

from .resources import ResourceType

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

# Kinds whose names must be DNS labels (they become hostnames or label values). CronJobs are not among
# them: upstream validates them as subdomains (ValidateReplicationControllerName) and then limits them to
# 52 characters in the CronJob admission (controllers/cronjob_admission.py).
_LABEL_KINDS = {"namespaces", "deployments"}
# Custom resources (pytorchjobs) get the apiserver's DNS-1123 subdomain rule; the training operator's
# webhook then applies its own DNS-1035 rule with its own message (controllers/pytorchjob_admission.py).
_DNS1035_KINDS = {"services"}


def validate_object_name(rt: ResourceType, name: str) -> str | None:
    """The problem with ``name`` for this kind, or None."""
    if rt.plural in _DNS1035_KINDS:
        if len(name) > 63:
            return "must be no more than 63 characters"
        return None if _DNS1035.match(name) else DNS1035_MSG
    if rt.plural in _LABEL_KINDS:
        if len(name) > 63:
            return "must be no more than 63 characters"
        return None if _LABEL.match(name) else LABEL_MSG
    if len(name) > 253:
        return "must be no more than 253 characters"
    return None if _SUBDOMAIN.match(name) else SUBDOMAIN_MSG
