"""Request body decoding: JSON (or YAML for apply), duplicate-field detection, field validation.

One function per concern so handlers read as a pipeline: decode -> validate fields -> admit -> store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .protobuf.wire import ProtobufError, UnknownKind, decode_object
from .schema import prune, schema_for, unknown_fields

JSON_TYPES = ("application/json", "application/yaml", "application/apply-patch+yaml")
# Nesting deeper than this is refused with 400 before anything walks the body recursively (Python's
# recursion limit is far below the API server's decoder depth of 10000; real objects nest ~20 deep).
MAX_DEPTH = 100
TOO_DEEP = f"exceeded max depth: the local cluster accepts at most {MAX_DEPTH} levels of nesting"


class _DuplicateField(errors.LocalClusterError):
    """Raised by the fast decoding pass at the first repeated key; the slow pass then names them all."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateField(key)
        result[key] = value
    return result


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as decoded, before duplicate keys collapse (the slow pass's ``object_pairs_hook``)."""


def _collapse(value: Any, path: str, duplicates: list[str]) -> Any:
    """Build the object the last duplicate wins in (as Go's decoder does), noting each repeated key's path
    the way sigs.k8s.io/json's strict mode prints it (``spec.template``, ``containers[0].name``)."""
    if isinstance(value, _Pairs):
        result: dict[str, Any] = {}
        for key, item in value:
            child = f"{path}.{key}" if path else key
            if key in result and child not in duplicates:
                duplicates.append(child)
            result[key] = _collapse(item, child, duplicates)
        return result
    if isinstance(value, list):
        return [_collapse(item, f"{path}[{i}]", duplicates) for i, item in enumerate(value)]
    return value


@dataclass
class Decoded:
    body: Any
    duplicates: list[str] = field(default_factory=list)


def decode_body(raw: bytes, content_type: str) -> Decoded:
    """Parse a request body: JSON, YAML, or Kubernetes protobuf for built-in kinds (what client-go's
    typed clients, kubectl's ``create`` among them, always send: see :mod:`.protobuf.wire`)."""
    media = content_type.split(";")[0].strip().lower()
    if media == "application/vnd.kubernetes.protobuf":
        try:
            return Decoded(decode_object(raw))
        except UnknownKind as exc:
            raise errors.unsupported_media_type(f"{media} ({exc})") from exc
        except ProtobufError as exc:
            raise errors.bad_request(f"error decoding protobuf: {exc}") from exc
    if media.startswith("application/vnd.kubernetes.protobuf"):
        raise errors.unsupported_media_type(media)
    if media in ("application/yaml", "application/apply-patch+yaml"):
        import yaml

        try:
            loaded = yaml.safe_load(raw.decode() or "{}")
        except RecursionError as exc:
            raise errors.bad_request(f"error decoding YAML: {TOO_DEEP}") from exc
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from exc
        _check_depth(loaded, "YAML")
        return Decoded(loaded)
    if media and media not in ("application/json", "*/*") and not media.endswith("+json"):
        raise errors.unsupported_media_type(media)
    duplicates: list[str] = []
    try:
        body = json.loads(raw or b"{}", object_pairs_hook=_no_duplicates)
    except _DuplicateField:
        body = _collapse(json.loads(raw, object_pairs_hook=_Pairs), "", duplicates)
    except RecursionError as exc:
        raise errors.bad_request(f"error decoding JSON: {TOO_DEEP}") from exc
    except ValueError as exc:
        raise errors.bad_request(f"error decoding JSON: {exc}") from exc
    _check_depth(body, "JSON")
    return Decoded(body, duplicates)


def nesting_depth(value: Any) -> int:
    """How deep dicts and lists nest (iteratively: this must not itself hit the recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _check_depth(body: Any, what: str) -> None:
    if nesting_depth(body) > MAX_DEPTH:
        raise errors.bad_request(f"error decoding {what}: {TOO_DEEP}")


# The options object each verb's query parameters decode into (what upstream names in a 422 about them).
_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}
_FIELD_VALIDATION_VALUES = ("", "Ignore", "Strict", "Warn")


def validation_mode(value: str | None, method: str) -> str:
    """The request's ``fieldValidation``, checked like ``ValidateFieldValidation`` (exact spelling; anything
    else is a 422 on the verb's options object), with Warn as the default, as on a real API server."""
    value = value or ""
    if value not in _FIELD_VALIDATION_VALUES:
        supported = ", ".join(f'"{v}"' for v in _FIELD_VALIDATION_VALUES)
        cause = (
            "fieldValidation",
            "FieldValueNotSupported",
            f'Unsupported value: "{value}": supported values: {supported}',
        )
        kind = _OPTIONS_KIND.get(method, "CreateOptions")
        raise errors.invalid(kind, "meta.k8s.io", kind, "", [cause])
    return value or "Warn"


def check_fields(
    obj: dict[str, Any], api_version: str, kind: str, mode: str, duplicates: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """Apply a :func:`validation_mode`: returns (pruned object, warnings); Strict raises 400 like upstream:
    ``strict decoding error: unknown field "spec.foo", duplicate field "spec.bar"``."""
    schema = schema_for(api_version, kind)
    unknown = unknown_fields(obj, schema) if schema is not None else []
    problems = [f'unknown field "{p}"' for p in unknown] + [f'duplicate field "{d}"' for d in duplicates]
    if problems and mode == "Strict":
        raise errors.bad_request("strict decoding error: " + ", ".join(problems))
    pruned = prune(obj, schema) if schema is not None else obj
    return pruned, (problems if mode == "Warn" else [])


def warning_headers(warnings: list[str]) -> dict[str, str] | None:
    """``Warn`` mode's answer: each dropped or repeated field as a ``299`` warning (kubectl prints them)."""
    if not warnings:
        return None
    return {"Warning": ", ".join(f'299 - "{_escape_warning(w)}"' for w in warnings)}


def _escape_warning(text: str) -> str:
    """A warning is a quoted string in the header: its own quotes and backslashes are escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
