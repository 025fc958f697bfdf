"""Small helpers for object metadata: timestamps, uids, names, deep paths."""

from __future__ import annotations

import datetime as dt
import secrets
import string
import uuid
from typing import Any


def rfc3339(ts: float) -> str:
    """Kubernetes' metav1.Time: second precision, UTC, 'Z'."""
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def new_uid() -> str:
    return str(uuid.uuid4())


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet (no vowels)


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(length))


def generate_name(prefix: str) -> str:
    """``metadata.generateName``: the prefix cut so the whole name fits 63 characters, then 5 random chars."""
    return prefix[: 63 - 5] + random_suffix()


def dig(obj: Any, *path: str, default: Any = None) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return default
        obj = obj[part]
    return obj


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj.get("metadata", {}).get("labels") or {})


def owner_uids(obj: dict[str, Any]) -> list[str]:
    return [ref.get("uid", "") for ref in obj.get("metadata", {}).get("ownerReferences") or []]


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def owner_reference(owner: dict[str, Any], *, controller: bool = True, block: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


DNS1123_LABEL_CHARS = set(string.ascii_lowercase + string.digits + "-")
