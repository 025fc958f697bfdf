"""Decide, before sending anything, whether a server-side apply would change a live object. Pure.

Why decide client-side: a server-side apply of an unchanged object is a no-op on the server, but it is still
a PATCH, and "we wrote nothing" should be checkable at the API (audit logs, request counts) and cost
nothing. ``kubectl apply`` decides the same way (a diff against its last-applied annotation).

The rule, so that skipping is never wrong:

1. the live object carries :data:`APPLIED_ANNOTATION` with the digest of exactly the desired state we
   would send now (so a field we set last time and dropped since, which the apply would remove, forces an
   apply), and
2. every field of the desired state is in the live object with the same value (so someone's
   ``kubectl edit`` or ``kubectl scale`` of one of our fields forces an apply that restores it). Fields
   others own and we do not set are theirs: an apply would not touch them either.

Both are conservative: a live value that only *looks* different (a quantity written another way) makes
us apply, which is merely the old behaviour.

Provenance keys (the run id label and annotation) are left out of both checks: they record which DAG run
last *changed* the object, so a new run with the same desired state writes nothing instead of relabelling
every object (the ``Service configured, HorizontalPodAutoscaler configured`` of issue 16).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from airflow_k8s_ml.manifests.naming import ANNOTATION_PREFIX, RUN_ID_LABEL
from airflow_k8s_ml.manifests.quantities import parse_quantity

__all__ = ["APPLIED_ANNOTATION", "PROVENANCE_KEYS", "covers", "desired_digest", "is_unchanged", "stamped"]

#: Digest of the desired state last applied by this package (like kubectl's last-applied-configuration,
#: but a hash: the manifest itself is in managedFields already).
APPLIED_ANNOTATION = f"{ANNOTATION_PREFIX}applied"
#: Label/annotation keys that say which run last changed the object, not what the object should be.
PROVENANCE_KEYS = frozenset({RUN_ID_LABEL})
#: Values an absent live field may stand for: the API server drops empty maps and lists, and Go's
#: ``omitempty`` drops zero values (a ``minReadySeconds: 0`` is not echoed back by a real API server).
_EMPTY: tuple[Any, ...] = (None, {}, [], 0, "")


def _without_provenance(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    meta = out.get("metadata") or {}
    for key in ("labels", "annotations"):
        values = meta.get(key)
        if isinstance(values, dict):
            for name in [*PROVENANCE_KEYS, APPLIED_ANNOTATION]:
                values.pop(name, None)
            if not values:
                meta.pop(key)
    return out


def desired_digest(obj: Mapping[str, Any]) -> str:
    """A stable digest of the desired state (canonical JSON), provenance and our own stamp left out."""
    text = json.dumps(_without_provenance(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def stamped(obj: Mapping[str, Any], digest: str | None = None) -> dict[str, Any]:
    """A copy carrying :data:`APPLIED_ANNOTATION` (``digest`` defaults to the object's own)."""
    out = copy.deepcopy(dict(obj))
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        APPLIED_ANNOTATION: digest or desired_digest(obj),
    }
    return out


def _same_scalar(want: Any, have: Any) -> bool:
    if isinstance(want, bool) or isinstance(have, bool):
        return want is have
    if want == have:
        return True
    if isinstance(want, str) and isinstance(have, str):  # "0.5" vs "500m": equal quantities
        try:
            left: Decimal = parse_quantity(want)
            return left == parse_quantity(have)
        except Exception:
            return False
    return False


def covers(want: Any, have: Any) -> bool:
    """Every field of ``want`` is in ``have`` with the same value (maps: a subset; lists: the same length,
    item by item). An empty or zero value in ``want`` matches an absent field (the server drops them)."""
    if isinstance(want, Mapping):
        if not isinstance(have, Mapping):
            return have is None and not want
        return all(
            (key not in have and value in _EMPTY) or (key in have and covers(value, have[key]))
            for key, value in want.items()
        )
    if isinstance(want, list):
        if not isinstance(have, list):
            return have is None and not want
        return len(want) == len(have) and all(covers(w, h) for w, h in zip(want, have, strict=True))
    return _same_scalar(want, have)


def is_unchanged(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """Applying ``desired`` (stamped or not) to ``live`` would change nothing we own: skip the write."""
    if not live:
        return False
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if annotations.get(APPLIED_ANNOTATION) != desired_digest(desired):
        return False
    return covers(_without_provenance(desired), live)
