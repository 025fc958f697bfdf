"""Garbage collector: ownerReferences-driven deletion, as kube-controller-manager's garbagecollector does.

- Background: once every owner of an object is gone, the object is deleted.
- Foreground: an owner marked with the ``foregroundDeletion`` finalizer has its dependents deleted first;
  the finalizer is removed (and the owner disappears) once no ``blockOwnerDeletion`` dependent remains.
- Orphan is handled at delete time by the store (owner references are stripped).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .. import errors
from ..resources import RESOURCE_TYPES, ResourceType
from ..store import FOREGROUND_FINALIZER, Change, Obj
from .base import Controller, ObjKey

if TYPE_CHECKING:
    from ..services import ClusterServices

_BY_STORAGE: dict[tuple[str, str], ResourceType] = {}
for _rt in RESOURCE_TYPES:
    _BY_STORAGE.setdefault(_rt.storage_key, _rt)


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        # The dependency graph (upstream's GC keeps one too): owner uid -> {dependent uid: storage key}, so
        # a deletion does not walk every object of the cluster to find the dependents.
        self._dependents: dict[str, dict[str, tuple[str, str]]] = {}
        self._owners: dict[str, set[str]] = {}

    def attach(self) -> None:
        for storage_key, obj in self.store.all_objects():
            self._track(storage_key, obj, deleted=False)
        self.store.add_listener(self._on_commit)  # before the work queue's listener: reconciles see it

    def _on_commit(self, change: Change) -> None:
        self._track(change.storage_key, change.obj, change.type == "DELETED")

    def _track(self, storage_key: tuple[str, str], obj: Obj, deleted: bool) -> None:
        uid = obj["metadata"].get("uid", "")
        for owner in self._owners.pop(uid, set()):
            deps = self._dependents.get(owner, {})
            deps.pop(uid, None)
            if not deps:
                self._dependents.pop(owner, None)
        if deleted:
            return
        owners = {ref.get("uid", "") for ref in obj["metadata"].get("ownerReferences") or []}
        if owners:
            self._owners[uid] = owners
            for owner in owners:
                self._dependents.setdefault(owner, {})[uid] = storage_key

    def _dependents_of(self, uid: str) -> list[tuple[tuple[str, str], Obj]]:
        found = []
        for dep_uid, storage_key in sorted(self._dependents.get(uid, {}).items()):
            obj = self.store.by_uid(dep_uid)
            if obj is not None:
                found.append((storage_key, obj))
        return found

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
        for storage_key, dep in self._dependents_of(uid):
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
        for storage_key, dep in self._dependents_of(uid):
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
        except errors.StatusError as exc:
            if exc.code != 404:
                raise

    @staticmethod
    def _rt_of(obj: Obj) -> ResourceType:
        for rt in RESOURCE_TYPES:
            if rt.api_version == obj["apiVersion"] and rt.kind == obj["kind"]:
                return rt
        raise KeyError(obj["kind"])
