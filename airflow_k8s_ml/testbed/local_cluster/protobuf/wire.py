"""Kubernetes protobuf request bodies to the JSON-shaped objects the rest of the server reads.

Why: client-go's generated clients force ``application/vnd.kubernetes.protobuf`` for built-in kinds
(client-go ``rest/request.go`` ``UseProtobufAsDefault``), and a 415 does not make them fall back: only a
415 to a CBOR request does (``rest/client.go`` ``requestClientContentConfigProvider.UnsupportedMediaType``;
"all generated clients accessing built-in kube resources are forced to protobuf, so those will not
degrade to JSON"). Discovery does not advertise content types either. So ``kubectl create namespace``,
``create deployment``, ``create secret`` and ``auth can-i`` work only if the server reads protobuf.

The encoding (k8s.io/apimachinery ``runtime/serializer/protobuf``): the magic ``k8s\\0``, then a
``runtime.Unknown`` {typeMeta {apiVersion, kind}, raw, contentEncoding, contentType} whose ``raw`` is the
object's message from ``generated.proto``. The field table (``schema.json``, see :mod:`.generate`) also
says, per field, whether Go holds it as a pointer and whether its JSON tag has ``omitempty``: gogo writes
every non-pointer field, so a zero non-pointer ``omitempty`` field is dropped as Go's JSON would drop it.
The types with their own JSON form (Time, MicroTime, Quantity, IntOrString, RawExtension, FieldsV1,
Duration, ``bytes`` as base64) are rendered as Go renders them. Pure: bytes in, a dict out.
"""

from __future__ import annotations

import base64
import functools
import json
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MAGIC = b"k8s\x00"
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"
_TIME, _MICRO_TIME, _DURATION, _FIELDS = (
    f"{_META}.{n}" for n in ("Time", "MicroTime", "Duration", "FieldsV1")
)
_QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
_RAW = "k8s.io.apimachinery.pkg.runtime.RawExtension"
_OPTIONS = ("DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions", "ListOptions")
_POINTER, _OMITEMPTY = 1, 2


class ProtobufError(ValueError):
    """The body is not a Kubernetes protobuf message this table can read (the message says why)."""


class UnknownKind(ProtobufError):
    """A kind with no protobuf form (custom resources are JSON only: the apiserver answers 415)."""


@functools.cache
def _schema() -> dict[str, dict[str, list[Any]]]:
    loaded: dict[str, dict[str, list[Any]]] = json.loads(Path(__file__).with_name("schema.json").read_text())
    return loaded


def message_for(api_version: str, kind: str) -> str:
    """The proto message of a kind: ``apps/v1`` Deployment -> ``k8s.io.api.apps.v1.Deployment``."""
    if kind in _OPTIONS:
        return f"{_META}.{kind}"
    group, _, version = api_version.rpartition("/")
    directory = {"": "core", "rbac.authorization.k8s.io": "rbac"}.get(group, group.removesuffix(".k8s.io"))
    return f"k8s.io.api.{directory}.{version}.{kind}"


def decode_object(raw: bytes) -> dict[str, Any]:
    """A whole request body (magic + Unknown envelope) as the object's JSON form."""
    if not raw.startswith(MAGIC):
        raise ProtobufError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    envelope = _decode(_RUNTIME_UNKNOWN, raw[len(MAGIC) :])
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if envelope.get("contentEncoding"):
        raise ProtobufError(f"unsupported protobuf content encoding {envelope['contentEncoding']!r}")
    message = message_for(api_version, kind)
    if message not in _schema():
        raise UnknownKind(f"no protobuf schema for {api_version}, Kind={kind}: send it as application/json")
    body = _decode(message, base64.b64decode(envelope.get("raw", "")))
    return {"apiVersion": api_version, "kind": kind, **body}


_RUNTIME_UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"


def _decode(message: str, data: bytes) -> dict[str, Any]:
    fields = _schema().get(message)
    if fields is None:
        raise ProtobufError(f"no protobuf schema for message {message}")
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        field = fields.get(str(number))
        if field is None:
            continue  # a field newer than the table: skipped, as proto2 keeps unknown fields aside
        name, type_, label, _flags = field
        if label == "m":
            entry = _map_entry(type_, value)
            out.setdefault(name, {})[entry[0]] = entry[1]
        elif label == "r":
            out.setdefault(name, []).extend(_repeated(type_, wire, value))
        else:
            out[name] = _value(type_, wire, value)
    for name, type_, label, flags in fields.values():
        if name in out and label == "o" and _omitted(out[name], type_, flags):
            del out[name]
    return out


def _omitted(value: Any, type_: str, flags: int) -> bool:
    """What Go's JSON leaves out: a zero time (null) always; a zero non-pointer ``omitempty`` scalar."""
    if value is None:
        return True
    if flags & _POINTER or not flags & _OMITEMPTY or (not _is_scalar(type_) and type_ not in _SPECIAL):
        return False
    return value in ("", 0, False) and not isinstance(value, dict)


def _map_entry(value_type: str, data: Any) -> tuple[str, Any]:
    key, value = "", _zero(value_type)
    for number, wire, item in _fields(data):
        if number == 1:
            key = item.decode()
        elif number == 2:
            value = _value(value_type, wire, item)
    return key, value


def _repeated(type_: str, wire: int, value: Any) -> list[Any]:
    if wire == 2 and type_ in _VARINTS:  # packed
        return [_value(type_, 0, v) for v in _varints(value)]
    return [_value(type_, wire, value)]


def _value(type_: str, wire: int, value: Any) -> Any:
    if type_ in _SPECIAL:
        return _SPECIAL[type_](_decode(type_, value))
    if type_ == "string":
        return value.decode()
    if type_ == "bytes":
        return base64.b64encode(value).decode()
    if type_ == "bool":
        return bool(value)
    if type_ in ("int32", "int64"):
        return value - (1 << 64) if value >= 1 << 63 else value
    if type_ in ("uint32", "uint64", "fixed64"):
        return value
    if type_ == "double":
        return struct.unpack("<d", value)[0]
    if type_ == "float":
        return struct.unpack("<f", value)[0]
    return _decode(type_, value)


def _zero(type_: str) -> Any:
    return {"string": "", "bytes": "", "bool": False}.get(type_, 0 if type_ in _VARINTS else None)


def _is_scalar(type_: str) -> bool:
    return type_ in ("string", "bytes", "bool", "double", "float", *_VARINTS)


_VARINTS = ("int32", "int64", "uint32", "uint64")


# -- wire format -------------------------------------------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated protobuf varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _varints(data: bytes) -> Iterator[int]:
    pos = 0
    while pos < len(data):
        value, pos = _varint(data, pos)
        yield value


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, raw value) of each field in order."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported protobuf wire type {wire}")
        if pos > len(data):
            raise ProtobufError("truncated protobuf message")
        yield number, wire, value


# -- types with their own JSON form -------------------------------------------------------------------
def _time(fields: dict[str, Any], micro: bool = False) -> str | None:
    seconds, nanos = int(fields.get("seconds", 0)), int(fields.get("nanos", 0))
    if not seconds and not nanos:
        return None  # Go's zero time marshals as null
    stamp = datetime.fromtimestamp(seconds, UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(fields: dict[str, Any]) -> str:
    """A ``time.Duration`` as Go prints it (``1h2m3s``, ``1.5s``, ``0s``)."""
    nanos = int(fields.get("duration", 0))
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    seconds = f"{rest / 10**9:.9f}".rstrip("0").rstrip(".")
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "") + f"{seconds}s"
    return sign + text


def _raw_json(raw: Any) -> Any:
    text = base64.b64decode(raw or "")
    return json.loads(text) if text else None


_SPECIAL: dict[str, Any] = {
    _TIME: _time,
    _MICRO_TIME: lambda f: _time(f, micro=True),
    _DURATION: _duration,
    _QUANTITY: lambda f: f.get("string", ""),
    _INT_OR_STRING: lambda f: f.get("strVal", "") if int(f.get("type", 0)) == 1 else int(f.get("intVal", 0)),
    _RAW: lambda f: _raw_json(f.get("raw")),
    _FIELDS: lambda f: _raw_json(f.get("Raw")),
}
