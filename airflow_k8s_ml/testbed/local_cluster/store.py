"""The object store: one strictly increasing resourceVersion, optimistic concurrency, and a watch history.

All state of the local cluster lives here and is touched only from the cluster's event loop thread, so no
locks are needed: a watch is served as a snapshot taken synchronously followed by the live change queue,
which is exactly the consistency a real apiserver gives (no gap, no duplicate).

Reads are served from memory. With a :class:`~.journal.Journal`, every change is first committed to it
(SQLite), so the store can be rebuilt after a restart or a crash with the same objects, resourceVersions
and watch history. The encoded size of each change is etcd's request size: objects over 1.5 MiB are
refused with etcd's error, as the API server passes it on.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import itertools
import json
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import errors
from .kinds import DeleteRules
from .meta import generate_name, new_uid, rfc3339
from .resources import NAMESPACES, ResourceType

if TYPE_CHECKING:
    from .journal import Journal

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
_NON_SPEC_KEYS = {"metadata", "status", "apiVersion", "kind"}
# etcd's default --max-request-bytes: a larger write fails with its error, which the API server passes on
# as a 500 (``Error from server: etcdserver: request is too large``).
MAX_OBJECT_BYTES = 1536 * 1024
TOO_LARGE_MESSAGE = "etcdserver: request is too large"


@dataclass(frozen=True)
class Change:
    """One committed change; DELETED carries the last state with the deletion's resourceVersion."""

    rv: int
    type: str
    storage_key: tuple[str, str]
    namespace: str
    obj: Obj
    old: Obj | None
    size: int = 0  # bytes of the encoded object (what the journal stored)


@dataclass(eq=False)
class Watch:
    """One watcher's pending changes, bounded like the API server's per-watcher channel: a watcher that
    falls ``limit`` changes behind is closed (``overflowed``) instead of buffering without end; its client
    resumes from the last resourceVersion it saw, as clients of a real API server do."""

    storage_key: tuple[str, str]
    namespace: str | None
    limit: int = 1000
    buffer: deque[Change] = field(default_factory=deque)
    closed: bool = False
    overflowed: bool = False
    on_overflow: Callable[[], None] | None = None
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, change: Change) -> bool:
        """Queue a change; False (and nothing queued) when the watcher is this far behind."""
        if len(self.buffer) >= self.limit:
            return False
        self.buffer.append(change)
        self._wakeup.set()
        return True

    def close(self, overflowed: bool = False) -> None:
        self.closed = True
        if overflowed:
            self.overflowed = True
            self.buffer.clear()  # resumed from history by the client; hold no references meanwhile
            if self.on_overflow is not None:
                self.on_overflow()
        self._wakeup.set()

    async def next(self, timeout: float | None) -> Change | None:
        """The next change; None once closed and drained; TimeoutError after ``timeout`` seconds."""
        while not self.buffer:
            if self.closed:
                return None
            self._wakeup.clear()
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        return self.buffer.popleft()


class Store:
    def __init__(
        self,
        history: int = 10_000,
        clock: Callable[[], float] = time.time,
        *,
        journal: Journal | None = None,
        history_bytes: int = 64 * 1024 * 1024,
        watch_buffer: int = 1000,
        max_object_bytes: int = MAX_OBJECT_BYTES,
    ) -> None:
        # A new cluster starts far above any resourceVersion an earlier cluster on another state dir handed
        # out (they count from a lower clock), so such a stale resourceVersion is older than our history: 410.
        self._rv = int(time.time() * 1000)
        self._floor = self._rv
        self._objects: dict[tuple[str, str], dict[Key, Obj]] = {}
        # Bounded by count and by encoded bytes, so large objects cannot make the history unbounded.
        self._history: deque[Change] = deque()
        self._history_limit = history
        self._history_bytes_limit = history_bytes
        self._history_bytes = 0
        self._watches: set[Watch] = set()
        self._watch_buffer = watch_buffer
        self._max_object_bytes = max_object_bytes
        self._listeners: builtins.list[Callable[[Change], None]] = []
        self._clock = clock
        self._uid_index: dict[str, tuple[tuple[str, str], Key]] = {}
        self._journal = journal
        self._since_compaction = 0
        # Kind-specific deletion rules, registered by each kind's owner (see kinds.py).
        self.delete_rules = DeleteRules()
        if journal is not None:
            self._restore(journal)

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
        if self._finalized(rt, new):
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
        if self._finalized(rt, new):
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
        _check_preconditions(rt, current, precondition_uid, precondition_rv)
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
        rule = self.delete_rules[rt.storage_key]
        grace = rule.grace_period(current, grace_period)
        if grace is not None:
            meta.setdefault("deletionTimestamp", now)
            meta["deletionGracePeriodSeconds"] = grace
            self._commit("MODIFIED", rt, key, new, current)
            return False, copy.deepcopy(new)
        if rule.empties_namespace:
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
        w = Watch(rt.storage_key, namespace, self._watch_buffer)
        backlog: builtins.list[Change] = []
        if since is not None:
            backlog = [c for c in self._history if c.rv > since and self._concerns(w, c)]
        self._watches.add(w)
        return w, backlog

    def stop_watch(self, w: Watch) -> None:
        w.closed = True
        self._watches.discard(w)

    def close_all_watches(self) -> None:
        """End every watch after the changes already queued for it (shutdown, fault injection)."""
        for w in list(self._watches):
            w.close()
            self._watches.discard(w)

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def add_listener(self, callback: Callable[[Change], None]) -> None:
        """Controllers subscribe here; called synchronously after each commit."""
        self._listeners.append(callback)

    def expire_history(self) -> None:
        """Forget the watch history (fault injection: every resume now gets 410)."""
        self._history.clear()
        self._history_bytes = 0
        self._floor = self._rv
        if self._journal is not None:
            self._journal.compact(self._floor)

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    # -- restoring from the journal -----------------------------------------------------------------
    def _restore(self, journal: Journal) -> None:
        """Rebuild objects, resourceVersion and watch history from the log (each change's ``old`` is the
        previous version of the same key, which the log keeps)."""
        compacted = journal.get("compacted")
        if compacted is None:  # a new state dir: remember where this cluster's resourceVersions start
            journal.put("compacted", str(self._rv))
            return
        self._floor = int(compacted)
        rv = self._floor
        for row in journal.rows():
            rv = max(rv, row.rv)
            obj: Obj = json.loads(row.value)
            bucket = self._objects.setdefault(row.storage_key, {})
            key = (row.namespace, row.name)
            old = bucket.get(key)
            uid = obj["metadata"].get("uid", "")
            if row.type == "DELETED":
                bucket.pop(key, None)
                self._uid_index.pop(uid, None)
            else:
                bucket[key] = obj
                self._uid_index[uid] = (row.storage_key, key)
            if row.rv > self._floor:
                self._remember(
                    Change(row.rv, row.type, row.storage_key, row.namespace, obj, old, len(row.value))
                )
        self._rv = rv

    def _remember(self, change: Change) -> None:
        """Append to the watch history, dropping the oldest beyond the count and byte bounds."""
        self._history.append(change)
        self._history_bytes += change.size
        while len(self._history) > self._history_limit or (
            self._history_bytes > self._history_bytes_limit and len(self._history) > 1
        ):
            dropped = self._history.popleft()
            self._history_bytes -= dropped.size
            self._floor = dropped.rv

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
        ns = self._objects.get(NAMESPACES.storage_key, {}).get(("", namespace))
        if ns is None:
            raise errors.not_found(NAMESPACES.group, NAMESPACES.plural, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.StatusError(
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

    def _finalized(self, rt: ResourceType, obj: Obj) -> bool:
        """A terminating object whose finalizers are gone goes (``ShouldDeleteDuringUpdate``), if its kind's
        rule allows it now."""
        meta = obj["metadata"]
        return (
            bool(meta.get("deletionTimestamp"))
            and not meta.get("finalizers")
            and self.delete_rules[rt.storage_key].removable(obj)
        )

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
                if key[0] == namespace and storage_key != NAMESPACES.storage_key:
                    # A copy: the stored version (in the history too) keeps its own resourceVersion.
                    last = {**obj, "metadata": {**obj["metadata"]}}
                    self._commit_key("DELETED", storage_key, key, last, obj)

    def _remove(self, rt: ResourceType, key: Key, last: Obj) -> None:
        self._commit("DELETED", rt, key, last, self._bucket(rt).get(key))

    def _commit(self, type_: str, rt: ResourceType, key: Key, obj: Obj, old: Obj | None) -> None:
        self._commit_key(type_, rt.storage_key, key, obj, old)

    def _commit_key(
        self, type_: str, storage_key: tuple[str, str], key: Key, obj: Obj, old: Obj | None
    ) -> None:
        """Encode, check etcd's size limit, write to the journal, then change memory and notify: a change
        the API acknowledges is durable, and a refused one left no trace."""
        rv = self._rv + 1
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = json.dumps(obj, separators=(",", ":")).encode()
        if len(raw) > self._max_object_bytes and type_ != "DELETED":
            obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"] if old else ""
            raise errors.StatusError(500, "", TOO_LARGE_MESSAGE)
        if self._journal is not None:
            self._journal.append(rv, type_, storage_key, key[0], key[1], raw)
        self._rv = rv
        bucket = self._objects.setdefault(storage_key, {})
        uid = obj["metadata"].get("uid", "")
        if type_ == "DELETED":
            bucket.pop(key, None)
            self._uid_index.pop(uid, None)
        else:
            bucket[key] = obj
            self._uid_index[uid] = (storage_key, key)
        change = Change(self._rv, type_, storage_key, key[0], obj, old, len(raw))
        self._remember(change)
        self._maybe_compact()
        for w in list(self._watches):
            if self._concerns(w, change) and not w.push(change):
                self._watches.discard(w)
                w.close(overflowed=True)
        for listener in list(self._listeners):
            listener(change)

    def _maybe_compact(self) -> None:
        """Compact the journal to the history's floor now and then (cheap: a few indexed deletes)."""
        if self._journal is None:
            return
        self._since_compaction += 1
        if self._since_compaction >= 1000:
            self._since_compaction = 0
            self._journal.compact(self._floor)

    @staticmethod
    def _concerns(w: Watch, change: Change) -> bool:
        return w.storage_key == change.storage_key and (
            w.namespace is None or w.namespace == change.namespace
        )


def _spec_of(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in _NON_SPEC_KEYS}


def _check_preconditions(
    rt: ResourceType, current: Obj, uid: str | None, resource_version: str | None
) -> None:
    """A DELETE's preconditions against the stored object: 409 Conflict when one does not hold."""
    meta = current["metadata"]
    if uid and uid != meta["uid"]:
        raise errors.StatusError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {rt.qualified} "{meta["name"]}": Precondition failed: '
            f"UID in precondition: {uid}, UID in object meta: {meta['uid']}",
        )
    if resource_version and resource_version != meta["resourceVersion"]:
        raise errors.conflict(rt.group, rt.plural, meta["name"])
