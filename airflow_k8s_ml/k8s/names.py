"""Names, label keys and label values as apimachinery validates them (``pkg/util/validation``).

One copy for both sides: the operators check a user's names at DAG parse time (``manifests.formats``) and
the local cluster answers a bad name with the apiserver's 422 (``local_cluster`` admission and selectors).
The ``*_errors`` functions return upstream's messages (an empty list means valid); the ``is_*`` predicates
are the cheap yes/no forms. Pure, stdlib only.
"""

from __future__ import annotations

import re

__all__ = [
    "DNS1035_LABEL_MAX",
    "DNS1035_MSG",
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "ENV_VAR_NAME_MSG",
    "LABEL_MSG",
    "LABEL_VALUE_MAX",
    "QUALIFIED_NAME_MAX",
    "SUBDOMAIN_MSG",
    "dns1035_label_errors",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_env_var_name",
    "is_label_value",
    "is_qualified_name",
    "label_value_errors",
    "max_len_error",
    "qualified_name_errors",
    "regex_error",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
# The classic C-identifier-like rule, accepted by every supported version (the relaxed rule, any printable
# ASCII but '=', is only on by default from 1.32).
_ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_ENV_VAR_NAME_RE = re.compile(_ENV_VAR_NAME_FMT)

_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream ``validation.RegexError``, including its double space between examples."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


SUBDOMAIN_MSG = regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    "example.com",
)
LABEL_MSG = regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character",
    _DNS1123_LABEL_FMT,
    "my-name",
    "123-abc",
)
DNS1035_MSG = regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character",
    _DNS1035_LABEL_FMT,
    "my-name",
    "abc-123",
)

ENV_VAR_NAME_MSG = regex_error(
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
    "and must not start with a digit",
    _ENV_VAR_NAME_FMT,
    "my.env-name",
    "MY_ENV.NAME",
    "MyEnvName1",
)


def is_dns1123_label(value: str) -> bool:
    """RFC 1123 label: namespaces, container and port names, Deployment names."""
    return len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL_RE.fullmatch(value))


def is_dns1123_subdomain(value: str) -> bool:
    """RFC 1123 subdomain: most object names, label key prefixes."""
    return len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN_RE.fullmatch(value))


def is_dns1035_label(value: str) -> bool:
    """RFC 1035 label: Services and PyTorchJobs (their names become DNS names)."""
    return len(value) <= DNS1035_LABEL_MAX and bool(_DNS1035_LABEL_RE.fullmatch(value))


def is_qualified_name(value: str) -> bool:
    """The *name part* of a qualified name (after any ``prefix/``): at most 63 of ``[A-Za-z0-9._-]``."""
    return len(value) <= QUALIFIED_NAME_MAX and bool(_QUALIFIED_NAME_RE.fullmatch(value))


def is_label_value(value: str) -> bool:
    return len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE_RE.fullmatch(value))


def is_env_var_name(value: str) -> bool:
    """``validation.IsEnvVarName`` (``env[].name``, ``envFrom`` keys after the prefix)."""
    return bool(_ENV_VAR_NAME_RE.fullmatch(value))


def _errors(value: str, limit: int, pattern: re.Pattern[str], message: str) -> list[str]:
    errs = [max_len_error(limit)] if len(value) > limit else []
    if not pattern.fullmatch(value):
        errs.append(message)
    return errs


def dns1123_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Label``."""
    return _errors(value, DNS1123_LABEL_MAX, _DNS1123_LABEL_RE, LABEL_MSG)


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``."""
    return _errors(value, DNS1123_SUBDOMAIN_MAX, _DNS1123_SUBDOMAIN_RE, SUBDOMAIN_MSG)


def dns1035_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1035Label``."""
    return _errors(value, DNS1035_LABEL_MAX, _DNS1035_LABEL_RE, DNS1035_MSG)


def _qualified_name_regex_error() -> str:
    return regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")


def qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName`` (label keys): optional DNS-subdomain prefix, ``/``, a 63-char name."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _qualified_name_regex_error()
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errs: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + msg for msg in dns1123_subdomain_errors(prefix))
    name = parts[-1]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _qualified_name_regex_error())
    return errs


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``."""
    return _errors(
        value,
        LABEL_VALUE_MAX,
        _LABEL_VALUE_RE,
        regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"),
    )
