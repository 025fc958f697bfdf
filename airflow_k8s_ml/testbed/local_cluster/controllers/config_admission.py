"""ConfigMap and Secret size validation (pkg/apis/core/validation ValidateConfigMap, ValidateSecret): the
values may total at most ``MaxSecretSize`` (1 MiB), checked before anything is stored, with upstream's
message (``ConfigMap "x" is invalid: []: Too long: may not be more than 1048576 bytes``).

An admission-only controller: it has nothing to reconcile.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .. import errors
from ..resources import ResourceType, lookup
from .base import Controller

Obj = dict[str, Any]
MAX_SECRET_SIZE = 1024 * 1024  # core.MaxSecretSize


def _rt(plural: str) -> ResourceType:
    rt = lookup("", "v1", plural)
    assert rt is not None
    return rt


CONFIGMAPS, SECRETS = _rt("configmaps"), _rt("secrets")


def _decoded_len(value: object) -> int:
    """Length of a base64 ``[]byte`` field as the API server counts it (after decoding)."""
    text = str(value or "")
    try:
        return len(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return len(text.encode())


def _too_long(field: str) -> tuple[str, str, str]:
    return (field, "FieldValueTooLong", f"Too long: may not be more than {MAX_SECRET_SIZE} bytes")


def admit_configmap(obj: Obj, old: Obj | None) -> Obj:
    total = sum(len(str(v or "").encode()) for v in (obj.get("data") or {}).values())
    total += sum(_decoded_len(v) for v in (obj.get("binaryData") or {}).values())
    if total > MAX_SECRET_SIZE:  # field "" (the whole object), which field.Path prints as "[]"
        name = (obj.get("metadata") or {}).get("name", "")
        raise errors.invalid("ConfigMap", "", "configmaps", name, [_too_long("[]")])
    return obj


def admit_secret(obj: Obj, old: Obj | None) -> Obj:
    """stringData is write-only: merged into data (base64), overriding it, as the v1 conversion does."""
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {}) or {}
        obj["data"] = data
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    total = sum(_decoded_len(v) for v in (obj.get("data") or {}).values())
    if total > MAX_SECRET_SIZE:
        name = (obj.get("metadata") or {}).get("name", "")
        raise errors.invalid("Secret", "", "secrets", name, [_too_long("data")])
    return obj


class ConfigAdmission(Controller):
    name = "config-admission"

    def attach(self) -> None:
        self.cluster.register_admission(CONFIGMAPS, admit_configmap)
        self.cluster.register_admission(SECRETS, admit_secret)

    async def reconcile(self, key: tuple[str, str]) -> None:
        return None
