"""Small store operations the custom-resource controllers (TrainJob, JobSet) share: their resource rows,
which of their kind controls an object, status writes guarded by uid, and deletes that tolerate races.
"""

from __future__ import annotations

import logging

from .. import errors
from ..meta import controller_ref
from ..resources import ResourceType, lookup
from ..store import Obj, Store

log = logging.getLogger(__name__)


def served(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None, f"{plural}.{group}/{version} is not served"
    return rt


def controlled_by(obj: Obj, api_version: str, kind: str) -> str | None:
    """Name of the ``kind`` object holding ``obj``'s controller reference (None for anything else)."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != kind or ref.get("apiVersion") != api_version:
        return None
    return str(ref.get("name", "")) or None


def write_status(store: Store, rt: ResourceType, obj: Obj, status: Obj) -> None:
    """Replace the status of ``obj`` unless it was deleted and recreated meanwhile (another uid)."""
    uid = obj["metadata"]["uid"]

    def put(current: Obj) -> None:
        if current["metadata"].get("uid") == uid:
            current["status"] = status

    store.mutate(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], put)


def delete_if_present(
    store: Store, rt: ResourceType, namespace: str, name: str, propagation: str | None = None
) -> None:
    """Delete unless gone or already terminating (both no-ops, as a controller's IgnoreNotFound)."""
    current = store.find(rt, namespace, name)
    if current is None or current["metadata"].get("deletionTimestamp"):
        return
    try:
        store.delete(rt, namespace, name, propagation=propagation)
    except errors.StatusError as exc:
        if exc.code != 404:
            log.warning("deleting %s %s/%s: %s", rt.qualified, namespace, name, exc.message)
