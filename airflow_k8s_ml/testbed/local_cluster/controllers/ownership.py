"""``ControllerRefManager`` semantics shared by the ReplicaSet and Deployment controllers.

A controller owns what carries its controller ownerReference. It adopts orphans its selector matches (so a
Deployment recreated after an orphaning delete picks its ReplicaSets up again) and releases owned objects
whose labels stopped matching (so relabelling a pod takes it out of its ReplicaSet), exactly as upstream.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..meta import controller_ref, owner_reference
from ..resources import ResourceType
from ..store import Obj, Store

Matcher = Callable[[dict[str, str]], bool]


def claim(store: Store, rt: ResourceType, owner: Obj, candidates: list[Obj], matches: Matcher) -> list[Obj]:
    """The candidates ``owner`` controls after adoption and release (objects as stored, copied)."""
    owner_meta = owner["metadata"]
    owner_deleting = bool(owner_meta.get("deletionTimestamp"))
    claimed: list[Obj] = []
    for obj in candidates:
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        ref = controller_ref(obj)
        if ref is not None:
            if ref.get("uid") != owner_meta["uid"]:
                continue
            if matches(labels) or owner_deleting:
                claimed.append(obj)
            else:
                _release(store, rt, obj, owner_meta["uid"])
            continue
        if owner_deleting or meta.get("deletionTimestamp") or not matches(labels):
            continue
        adopted = _adopt(store, rt, obj, owner)
        if adopted is not None:
            claimed.append(adopted)
    return claimed


def _adopt(store: Store, rt: ResourceType, obj: Obj, owner: Obj) -> Obj | None:
    reference = owner_reference(owner)

    def add(o: Obj) -> None:
        if controller_ref(o) is None:
            o["metadata"]["ownerReferences"] = [*(o["metadata"].get("ownerReferences") or []), reference]

    result = store.mutate(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], add)
    if result is None or (controller_ref(result) or {}).get("uid") != owner["metadata"]["uid"]:
        return None
    return copy.deepcopy(result)


def _release(store: Store, rt: ResourceType, obj: Obj, owner_uid: str) -> None:
    def drop(o: Obj) -> None:
        refs = [r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
        if refs:
            o["metadata"]["ownerReferences"] = refs
        else:
            o["metadata"].pop("ownerReferences", None)

    store.mutate(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], drop)


def controlled_by(obj: Obj, kind: str) -> dict[str, Any] | None:
    """The controller reference of ``obj`` when its controller is of ``kind`` (any apps/v1 owner)."""
    ref = controller_ref(obj)
    return ref if ref is not None and ref.get("kind") == kind else None
