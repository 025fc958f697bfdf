"""Garbage collector: ownerReferences-driven deletion, as kube-controller-manager's garbagecollector does.

- Background: once every owner of an object is gone, the object is deleted.
- Foreground: an owner marked with the ``foregroundDeletion`` finalizer has its dependents deleted first;
  the finalizer is removed (and the owner disappears) once no ``blockOwnerDeletion`` dependent remains.
- Orphan is handled at delete time by the store (owner references are stripped).
"""

from __future__ import annotations

from collections.abc import Iterable

from .. import errors
from ..resources import RESOURCE_TYPES, ResourceType
from ..store import FOREGROUND_FINALIZER, Change, Obj
from .base import Controller, ObjKey

_BY_STORAGE: dict[tuple[str, str], ResourceType] = {}
for _rt in RESOURCE_TYPES:
    _BY_STORAGE.setdefault(_rt.storage_key, _rt)


class GarbageCollector(Controller):
    name = "garbage-collector"

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        meta = change.obj["metadata"]
        if change.type == "DELETED" or (
            meta.get("deletionTimestamp") and FOREGROUND_FINALIZER in (meta.get("finalizers") or [])
        ):
            yield ("owner", meta["uid"])
        # A dependent that disappeared may unblock its foreground-deleting owner.
        for ref in meta.get("ownerReferences") or []:
            if change.type == "DELETED" or meta.get("deletionTimestamp"):
                yield ("owner", ref.get("uid", ""))

    def all_keys(self) -> Iterable[ObjKey]:
        owners = set()
        for _, obj in self.store.all_objects():
            for ref in obj["metadata"].get("ownerReferences") or []:
                owners.add(ref.get("uid", ""))
        return [("owner", uid) for uid in sorted(owners)]

    async def reconcile(self, key: ObjKey) -> None:
        uid = key[1]
        owner = self.store.by_uid(uid)
        if owner is None:
            self._collect_orphans(uid)
        elif owner["metadata"].get("deletionTimestamp") and FOREGROUND_FINALIZER in (
            owner["metadata"].get("finalizers") or []
        ):
            self._foreground(owner)

    def _collect_orphans(self, uid: str) -> None:
        for storage_key, dep in self.store.dependents_of(uid):
            refs = dep["metadata"].get("ownerReferences") or []
            alive = [r for r in refs if self.store.by_uid(r.get("uid", "")) is not None]
            rt = _BY_STORAGE[storage_key]
            ns, name = dep["metadata"].get("namespace", ""), dep["metadata"]["name"]
            if alive:

                def strip(o: Obj, dead: str = uid) -> None:
                    o["metadata"]["ownerReferences"] = [
                        r for r in o["metadata"].get("ownerReferences") or [] if r.get("uid") != dead
                    ]

                self.store.mutate(rt, ns, name, strip)
            elif not dep["metadata"].get("deletionTimestamp"):
                self._delete(rt, ns, name, "Background")

    def _foreground(self, owner: Obj) -> None:
        uid = owner["metadata"]["uid"]
        blocking = 0
        for storage_key, dep in self.store.dependents_of(uid):
            rt = _BY_STORAGE[storage_key]
            ref = next(r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") == uid)
            if ref.get("blockOwnerDeletion"):
                blocking += 1
            if not dep["metadata"].get("deletionTimestamp"):
                self._delete(rt, dep["metadata"].get("namespace", ""), dep["metadata"]["name"], "Foreground")
        if blocking == 0:
            owner_rt = self._rt_of(owner)

            def unblock(o: Obj) -> None:
                o["metadata"]["finalizers"] = [
                    f for f in o["metadata"].get("finalizers") or [] if f != FOREGROUND_FINALIZER
                ]
                if not o["metadata"]["finalizers"]:
                    del o["metadata"]["finalizers"]

            self.store.mutate(
                owner_rt, owner["metadata"].get("namespace", ""), owner["metadata"]["name"], unblock
            )

    def _delete(self, rt: ResourceType, ns: str, name: str, policy: str) -> None:
        try:
            self.store.delete(rt, ns, name, propagation=policy)
        except errors.ApiError as exc:
            if exc.code != 404:
                raise

    @staticmethod
    def _rt_of(obj: Obj) -> ResourceType:
        for rt in RESOURCE_TYPES:
            if rt.api_version == obj["apiVersion"] and rt.kind == obj["kind"]:
                return rt
        raise KeyError(obj["kind"])
