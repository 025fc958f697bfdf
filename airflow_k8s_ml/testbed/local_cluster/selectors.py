"""Field selectors (``fields/selector.go``) and the field labels each resource can be filtered by
(``pkg/registry/*/strategy.go``), as the local cluster's list and watch handlers apply them.

Label selectors are in the shared core (:mod:`airflow_k8s_ml.k8s.selectors`); errors are its
:class:`~airflow_k8s_ml.k8s.selectors.SelectorError`, answered with a 400 carrying upstream's message.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError

__all__ = ["FIELDS_BY_RESOURCE", "FieldSelector", "FieldTerm", "parse_field_selector", "supported_fields"]

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})

FIELDS_BY_RESOURCE: dict[str, frozenset[str]] = {
    "pods": _COMMON_FIELDS
    | {
        "status.phase",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.podIP",
        "status.nominatedNodeName",
    },
    "events": _COMMON_FIELDS
    | {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
    "jobs": _COMMON_FIELDS | {"status.successful"},
    "secrets": _COMMON_FIELDS | {"type"},
    "namespaces": _COMMON_FIELDS | {"status.phase"},
}
"""Field labels each resource (plural) can be filtered by; resources not listed support the common two."""


def supported_fields(plural: str) -> frozenset[str]:
    """Field labels a ``fieldSelector`` may use on ``plural``; at least ``metadata.name``/``namespace``."""
    return FIELDS_BY_RESOURCE.get(plural, _COMMON_FIELDS)


def _go_format(value: object) -> str:
    """How the apiserver turns a typed field into the string it compares (``strconv`` conventions)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _lookup_path(obj: Mapping[str, Any], dotted: str) -> object:
    current: object = obj
    for part in dotted.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _event_source(obj: Mapping[str, Any]) -> str:
    """Upstream: ``source.component``, falling back to ``reportingComponent`` for events.k8s.io writers."""
    return _go_format(_lookup_path(obj, "source.component")) or _go_format(obj.get("reportingComponent"))


def _job_successful(obj: Mapping[str, Any]) -> str:
    """Upstream names the label ``status.successful`` but reads ``status.succeeded`` (an int32, default 0)."""
    return _go_format(_lookup_path(obj, "status.succeeded") or 0)


_FIELD_RESOLVERS = {"source": _event_source, "status.successful": _job_successful}


def field_value(obj: Mapping[str, Any], field: str) -> str:
    """The string a field label has on ``obj``: a missing field is ``""``, numbers compare by their text."""
    resolver = _FIELD_RESOLVERS.get(field)
    return resolver(obj) if resolver else _go_format(_lookup_path(obj, field))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


@dataclass(frozen=True)
class FieldTerm:
    """``field=value`` (``equal=True``) or ``field!=value``; ``==`` is folded into ``=`` as upstream."""

    field: str
    value: str
    equal: bool = True

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (field_value(obj, self.field) == self.value) is self.equal

    def __str__(self) -> str:
        return f"{self.field}{'=' if self.equal else '!='}{_escape(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """An AND of :class:`FieldTerm` s; no terms selects everything."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(term.matches(obj) for term in self.terms)

    def requires_exact_match(self, field: str) -> str | None:
        """The value ``field`` must equal, if a term pins it (lets the store skip a scan for names)."""
        return next((t.value for t in self.terms if t.field == field and t.equal), None)

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not backslash-escaped; escapes stay in place for :func:`_unescape`."""
    terms, start, escaped = [], 0, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


_TERM_OPERATORS = ("!=", "==", "=")  # "==" before "=" so no '=' is left on the value


def _split_term(term: str) -> tuple[str, str, str] | None:
    """The first operator occurrence splits the term: field names cannot be escaped upstream either."""
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    r"""Undo ``\\``, ``\,`` and ``\=``; bare ``,``/``=`` and other escapes are errors, as upstream.

    The ``unescaped character`` message prints the code point as a number because upstream formats
    the rune with ``%v``; we keep it so messages compare equal with a real server.
    """
    out, escaped = [], False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(char)}")
        else:
            out.append(char)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str, supported: Collection[str]) -> FieldSelector:
    """Parse a ``fieldSelector`` query parameter and check every field label against ``supported``.

    Syntax errors are reported before unsupported labels, as upstream (parse, then convert labels). An
    unsupported label raises ``SelectorError('field label not supported: <field>')``.
    """
    terms = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, raw_value = split
        terms.append(FieldTerm(field, _unescape(raw_value), equal=op != "!="))
    for term in terms:
        if term.field not in supported:
            raise SelectorError(f"field label not supported: {term.field}")
    return FieldSelector(tuple(terms))
