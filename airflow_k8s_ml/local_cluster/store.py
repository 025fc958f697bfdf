"""The object store: one strictly increasing resourceVersion, optimistic concurrency, and a watch history.

All state of the local cluster lives here and is touched only from the cluster's event loop thread, so no
locks are needed: a watch is served as a snapshot taken synchronously followed by the live change queue,
which is exactly the consistency a real apiserver gives (no gap, no duplicate).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .meta import generate_name, new_uid, rfc3339
from .resources import ResourceType

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
_NON_SPEC_KEYS = {"metadata", "status", "apiVersion", "kind"}


@dataclass(frozen=True)
class Change:
    """One committed change; DELETED carries the last state with the deletion's resourceVersion."""

    rv: int
    type: str
    storage_key: tuple[str, str]
    namespace: str
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watch:
    storage_key: tuple[str, str]
    namespace: str | None
    queue: asyncio.Queue[Change | None] = field(default_factory=asyncio.Queue)
    closed: bool = False


class Store:
    def __init__(self, history: int = 10_000, clock: Callable[[], float] = time.time) -> None:
        # Start far above any resourceVersion an earlier run of the server handed out (they count from a
        # lower clock), so that after a restart every old resourceVersion is older than our history: 410.
        self._rv = int(time.time() * 1000)
        self._floor = self._rv
        self._objects: dict[tuple[str, str], dict[Key, Obj]] = {}
        self._history: deque[Change] = deque(maxlen=history)
        self._watches: set[Watch] = set()
        self._listeners: builtins.list[Callable[[Change], None]] = []
        self._clock = clock
        self._uid_index: dict[str, tuple[tuple[str, str], Key]] = {}

    # -- reading -----------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    @property
    def oldest_resource_version(self) -> int:
        return self._floor

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._bucket(rt).get(self._key(rt, namespace, name))
        if obj is None:
            raise errors.not_found(rt.group, rt.plural, name)
        return copy.deepcopy(obj)

    def find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        obj = self._bucket(rt).get(self._key(rt, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, rt: ResourceType, namespace: str | None = None) -> tuple[builtins.list[Obj], int]:
        return [copy.deepcopy(o) for o in self.iter(rt, namespace)], self._rv

    def iter(self, rt: ResourceType, namespace: str | None = None) -> Iterator[Obj]:
        """Live objects without copying: for controllers that only read."""
        for (ns, _), obj in sorted(self._bucket(rt).items()):
            if namespace is None or ns == namespace:
                yield obj

    def by_uid(self, uid: str) -> Obj | None:
        where = self._uid_index.get(uid)
        if where is None:
            return None
        return self._objects.get(where[0], {}).get(where[1])

    def dependents_of(self, uid: str) -> builtins.list[tuple[tuple[str, str], Obj]]:
        found = []
        for storage_key, bucket in self._objects.items():
            for obj in bucket.values():
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == uid for ref in refs):
                    found.append((storage_key, obj))
        return found

    def all_objects(self) -> Iterator[tuple[tuple[str, str], Obj]]:
        for storage_key, bucket in list(self._objects.items()):
            for obj in list(bucket.values()):
                yield storage_key, obj

    # -- writing -----------------------------------------------------------------------------------
    def create(self, rt: ResourceType, obj: Obj, *, dry_run: bool = False) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._unique_generated_name(rt, meta.get("namespace", ""), meta["generateName"])
        name = meta.get("name")
        if not name:
            raise errors.invalid(
                rt.kind,
                rt.group,
                rt.plural,
                "",
                [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")],
            )
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        if rt.namespaced:
            self._require_namespace(namespace)
        else:
            meta.pop("namespace", None)
        key = (namespace, name)
        bucket = self._bucket(rt)
        if key in bucket:
            raise errors.already_exists(rt.group, rt.plural, name)
        obj["apiVersion"] = (
            rt.api_version if rt.storage_version is None else f"{rt.group}/{rt.storage_version}"
        )
        obj["kind"] = rt.kind
        meta["uid"] = meta.get("uid") or new_uid()  # the cluster assigns it before admission (create)
        meta["creationTimestamp"] = rfc3339(self._clock())
        meta["generation"] = 1
        for transient in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(transient, None)
        if dry_run:
            meta["resourceVersion"] = str(self._rv)
            return obj
        self._commit("ADDED", rt, key, obj, None)
        return copy.deepcopy(obj)

    def update(
        self, rt: ResourceType, obj: Obj, *, subresource: str | None = None, dry_run: bool = False
    ) -> Obj:
        """Replace an object (PUT semantics). Status is written only through ``subresource='status'`` and
        everything else only without it, like the real registry strategies do."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace", "") if rt.namespaced else ""
        name = meta.get("name", "")
        key = self._key(rt, namespace, name)
        current = self._bucket(rt).get(key)
        if current is None:
            raise errors.not_found(rt.group, rt.plural, name)
        sent_rv = meta.get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name)
        new = self._merge_for_update(current, obj, subresource)
        if new == current:
            return copy.deepcopy(current)  # no-op writes do not bump resourceVersion (as upstream)
        if dry_run:
            return new
        if self._finalized(new):
            self._remove(rt, key, new)
            return copy.deepcopy(new)
        self._commit("MODIFIED", rt, key, new, current)
        return copy.deepcopy(new)

    def mutate(self, rt: ResourceType, namespace: str, name: str, fn: Callable[[Obj], None]) -> Obj | None:
        """Read-modify-write for controllers: ``fn`` edits a copy in place; spec and status both persist.
        Returns the new object, or None when the object is gone."""
        key = self._key(rt, namespace, name)
        current = self._bucket(rt).get(key)
        if current is None:
            return None
        new = copy.deepcopy(current)
        fn(new)
        if new == current:
            return current
        if _spec_of(new) != _spec_of(current):
            new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if self._finalized(new):
            self._remove(rt, key, new)
            return new
        self._commit("MODIFIED", rt, key, new, current)
        return new

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        grace_period: int | None = None,
        precondition_uid: str | None = None,
        precondition_rv: str | None = None,
        dry_run: bool = False,
    ) -> tuple[bool, Obj]:
        """Delete with the real propagation semantics. Returns (gone_now, object).

        Orphan strips this owner from dependents' ownerReferences; Background removes the owner now and
        lets the garbage collector remove dependents; Foreground keeps the owner (deletionTimestamp +
        finalizer ``foregroundDeletion``) until the collector has removed its blocking dependents.
        Pods that are running get a grace period: they carry deletionTimestamp until the kubelet has
        stopped their processes and confirms with ``grace_period=0``.
        """
        key = self._key(rt, namespace, name)
        current = self._bucket(rt).get(key)
        if current is None:
            raise errors.not_found(rt.group, rt.plural, name)
        if precondition_uid and precondition_uid != current["metadata"]["uid"]:
            raise errors.ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {rt.qualified} "{name}": Precondition failed: '
                f"UID in precondition: {precondition_uid}, UID in object meta: {current['metadata']['uid']}",
            )
        if precondition_rv and precondition_rv != current["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.group, rt.plural, name)
        policy = propagation or rt.default_propagation
        if dry_run:
            return True, copy.deepcopy(current)
        if policy == "Orphan":
            self._orphan_dependents(current["metadata"]["uid"])
        new = copy.deepcopy(current)
        meta = new["metadata"]
        now = rfc3339(self._clock())
        if policy == "Foreground" and self.dependents_of(meta["uid"]):
            finalizers = meta.setdefault("finalizers", [])
            if FOREGROUND_FINALIZER not in finalizers:
                finalizers.append(FOREGROUND_FINALIZER)
        if rt.plural == "pods" and self._needs_graceful_stop(current, grace_period):
            grace = (
                grace_period
                if grace_period is not None
                else current["spec"].get("terminationGracePeriodSeconds", 30)
            )
            meta.setdefault("deletionTimestamp", now)
            meta["deletionGracePeriodSeconds"] = grace
            self._commit("MODIFIED", rt, key, new, current)
            return False, copy.deepcopy(new)
        if rt.plural == "namespaces":
            self._delete_namespace_contents(meta["name"])
        if meta.get("finalizers"):
            if "deletionTimestamp" not in current["metadata"]:
                meta["deletionTimestamp"] = now
                meta["deletionGracePeriodSeconds"] = 0
                self._commit("MODIFIED", rt, key, new, current)
                return False, copy.deepcopy(new)
            if grace_period == 0 and current["metadata"].get("deletionGracePeriodSeconds") != 0:
                meta["deletionGracePeriodSeconds"] = 0  # a shorter grace period is recorded (kubelet confirm)
                self._commit("MODIFIED", rt, key, new, current)
                return False, copy.deepcopy(new)
            return False, copy.deepcopy(current)
        self._remove(rt, key, new)
        return True, copy.deepcopy(new)

    # -- watching ----------------------------------------------------------------------------------
    def watch(
        self, rt: ResourceType, namespace: str | None, since: int | None
    ) -> tuple[Watch, builtins.list[Change]]:
        """Register a watch. ``since=None`` means "from now"; a resourceVersion older than the retained
        history raises 410 Expired (the server sends it as an ERROR event)."""
        if since is not None and since < self._floor:
            raise errors.expired(str(since), self._floor)
        w = Watch(rt.storage_key, namespace)
        backlog: builtins.list[Change] = []
        if since is not None:
            backlog = [c for c in self._history if c.rv > since and self._concerns(w, c)]
        self._watches.add(w)
        return w, backlog

    def stop_watch(self, w: Watch) -> None:
        w.closed = True
        self._watches.discard(w)

    def close_all_watches(self) -> None:
        for w in list(self._watches):
            w.queue.put_nowait(None)
            self.stop_watch(w)

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def add_listener(self, callback: Callable[[Change], None]) -> None:
        """Controllers subscribe here; called synchronously after each commit."""
        self._listeners.append(callback)

    def expire_history(self) -> None:
        """Forget the watch history (fault injection: every resume now gets 410)."""
        self._history.clear()
        self._floor = self._rv

    # -- internals ---------------------------------------------------------------------------------
    def _bucket(self, rt: ResourceType) -> dict[Key, Obj]:
        return self._objects.setdefault(rt.storage_key, {})

    @staticmethod
    def _key(rt: ResourceType, namespace: str, name: str) -> Key:
        return (namespace if rt.namespaced else "", name)

    def _require_namespace(self, namespace: str) -> None:
        if not namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        ns = self._objects.get(("", "namespaces"), {}).get(("", namespace))
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {namespace} because it is being terminated",
            )

    def _unique_generated_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        bucket = self._bucket(rt)
        for _ in itertools.count():
            name = generate_name(prefix)
            if (namespace if rt.namespaced else "", name) not in bucket:
                return name
        raise AssertionError("unreachable")

    def _merge_for_update(self, current: Obj, sent: Obj, subresource: str | None) -> Obj:
        new = copy.deepcopy(current)
        if subresource == "status":
            if "status" in sent:
                new["status"] = copy.deepcopy(sent["status"])
            else:
                new.pop("status", None)
            return new
        for k in list(new):
            if k not in _NON_SPEC_KEYS:
                del new[k]
        for k, v in sent.items():
            if k not in _NON_SPEC_KEYS:
                new[k] = copy.deepcopy(v)
        sent_meta = sent.get("metadata") or {}
        meta = new["metadata"]
        for field_name in ("labels", "annotations", "ownerReferences", "finalizers"):
            if sent_meta.get(field_name) is not None:
                meta[field_name] = copy.deepcopy(sent_meta[field_name])
            else:
                meta.pop(field_name, None)
        if _spec_of(new) != _spec_of(current):
            meta["generation"] = current["metadata"].get("generation", 1) + 1
        return new

    @staticmethod
    def _finalized(obj: Obj) -> bool:
        meta = obj["metadata"]
        # A pod goes only once the kubelet confirmed (grace period 0), as upstream's ShouldDeleteDuringUpdate.
        return (
            bool(meta.get("deletionTimestamp"))
            and not meta.get("finalizers")
            and (obj.get("kind") != "Pod" or meta.get("deletionGracePeriodSeconds") == 0)
        )

    @staticmethod
    def _needs_graceful_stop(pod: Obj, grace_period: int | None) -> bool:
        if grace_period == 0:
            return False
        phase = (pod.get("status") or {}).get("phase", "Pending")
        return bool(pod.get("spec", {}).get("nodeName")) and phase not in ("Succeeded", "Failed")

    def _orphan_dependents(self, uid: str) -> None:
        for storage_key, dep in self.dependents_of(uid):
            dep_key = (dep["metadata"].get("namespace", ""), dep["metadata"]["name"])
            new = copy.deepcopy(dep)
            refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            if refs:
                new["metadata"]["ownerReferences"] = refs
            else:
                new["metadata"].pop("ownerReferences", None)
            self._commit_key("MODIFIED", storage_key, dep_key, new, dep)

    def _delete_namespace_contents(self, namespace: str) -> None:
        for storage_key, bucket in list(self._objects.items()):
            for key, obj in list(bucket.items()):
                if key[0] == namespace and storage_key != ("", "namespaces"):
                    self._commit_key("DELETED", storage_key, key, obj, obj)

    def _remove(self, rt: ResourceType, key: Key, last: Obj) -> None:
        self._commit("DELETED", rt, key, last, self._bucket(rt).get(key))

    def _commit(self, type_: str, rt: ResourceType, key: Key, obj: Obj, old: Obj | None) -> None:
        self._commit_key(type_, rt.storage_key, key, obj, old)

    def _commit_key(
        self, type_: str, storage_key: tuple[str, str], key: Key, obj: Obj, old: Obj | None
    ) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        bucket = self._objects.setdefault(storage_key, {})
        uid = obj["metadata"].get("uid", "")
        if type_ == "DELETED":
            bucket.pop(key, None)
            self._uid_index.pop(uid, None)
        else:
            bucket[key] = obj
            self._uid_index[uid] = (storage_key, key)
        change = Change(self._rv, type_, storage_key, key[0], obj, old)
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        self._history.append(change)
        for w in list(self._watches):
            if self._concerns(w, change):
                w.queue.put_nowait(change)
        for listener in list(self._listeners):
            listener(change)

    @staticmethod
    def _concerns(w: Watch, change: Change) -> bool:
        return w.storage_key == change.storage_key and (
            w.namespace is None or w.namespace == change.namespace
        )


def _spec_of(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in _NON_SPEC_KEYS}
