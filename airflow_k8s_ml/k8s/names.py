"""Names, label keys and label values as apimachinery validates them (``pkg/util/validation``).

One copy for both sides: the operators check a user's names at DAG parse time (``manifests.formats``) and
the local cluster answers a bad name with the apiserver's 422 (``local_cluster`` admission and selectors).
The ``*_errors`` functions return upstream's messages (an empty list means valid); the ``is_*`` predicates
are the cheap yes/no forms. Pure, stdlib only.
"""

from __future__ import annotations

from collections.abc import Callable

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

# The formats above are what upstream's messages quote; the matchers below accept exactly what their
# ``fullmatch`` would, with set look-ups instead of compiled regular expressions: this module is imported on
# every DAG parse, in a fresh dag-processor fork, where each ``re.compile`` costs up to 0.1 ms.
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_LOWER_DIGIT = _LOWER | frozenset("0123456789")
_LOWER_DIGIT_DASH = _LOWER_DIGIT | {"-"}
_ALNUM = _LOWER_DIGIT | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ALNUM_DASH_UNDERSCORE_DOT = _ALNUM | frozenset("-_.")
_ENV_FIRST = frozenset("-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ENV_REST = _ENV_FIRST | frozenset("0123456789")


def _ends_in(value: str, first: frozenset[str], middle: frozenset[str], last: frozenset[str]) -> bool:
    """``first middle* last`` or a single ``first`` that is also a ``last``."""
    return (
        bool(value)
        and value[0] in first
        and value[-1] in last
        and all(char in middle for char in value[1:-1])
    )


def _dns1123_label(value: str) -> bool:
    return _ends_in(value, _LOWER_DIGIT, _LOWER_DIGIT_DASH, _LOWER_DIGIT)


def _dns1123_subdomain(value: str) -> bool:
    return all(_dns1123_label(part) for part in value.split("."))


def _dns1035_label(value: str) -> bool:
    return _ends_in(value, _LOWER, _LOWER_DIGIT_DASH, _LOWER_DIGIT)


def _qualified_name(value: str) -> bool:
    return _ends_in(value, _ALNUM, _ALNUM_DASH_UNDERSCORE_DOT, _ALNUM)


def _label_value(value: str) -> bool:
    return not value or _qualified_name(value)


def _env_var_name(value: str) -> bool:
    return bool(value) and value[0] in _ENV_FIRST and all(char in _ENV_REST for char in value[1:])

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
    return len(value) <= DNS1123_LABEL_MAX and _dns1123_label(value)


def is_dns1123_subdomain(value: str) -> bool:
    """RFC 1123 subdomain: most object names, label key prefixes."""
    return len(value) <= DNS1123_SUBDOMAIN_MAX and _dns1123_subdomain(value)


def is_dns1035_label(value: str) -> bool:
    """RFC 1035 label: Services and PyTorchJobs (their names become DNS names)."""
    return len(value) <= DNS1035_LABEL_MAX and _dns1035_label(value)


def is_qualified_name(value: str) -> bool:
    """The *name part* of a qualified name (after any ``prefix/``): at most 63 of ``[A-Za-z0-9._-]``."""
    return len(value) <= QUALIFIED_NAME_MAX and _qualified_name(value)


def is_label_value(value: str) -> bool:
    return len(value) <= LABEL_VALUE_MAX and _label_value(value)


def is_env_var_name(value: str) -> bool:
    """``validation.IsEnvVarName`` (``env[].name``, ``envFrom`` keys after the prefix)."""
    return _env_var_name(value)


def _errors(value: str, limit: int, matches: Callable[[str], bool], message: str) -> list[str]:
    errs = [max_len_error(limit)] if len(value) > limit else []
    if not matches(value):
        errs.append(message)
    return errs


def dns1123_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Label``."""
    return _errors(value, DNS1123_LABEL_MAX, _dns1123_label, LABEL_MSG)


def dns1123_subdomain_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Subdomain``."""
    return _errors(value, DNS1123_SUBDOMAIN_MAX, _dns1123_subdomain, SUBDOMAIN_MSG)


def dns1035_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1035Label``."""
    return _errors(value, DNS1035_LABEL_MAX, _dns1035_label, DNS1035_MSG)


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
    if not _qualified_name(name):
        errs.append("name part " + _qualified_name_regex_error())
    return errs


def label_value_errors(value: str) -> list[str]:
    """``validation.IsValidLabelValue``."""
    return _errors(
        value,
        LABEL_VALUE_MAX,
        _label_value,
        regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"),
    )
