"""The batch/v1 Job controller: admission (defaults, generated selector, validation) plus a reconcile
loop that runs :func:`sync.sync_job` over the store, as kube-controller-manager's job controller does.

Pods are created through the cluster's admission like an API client's would be, carry a controller
ownerReference and the ``batch.kubernetes.io/job-tracking`` finalizer, and are found again by that
ownerReference. Time-based rules (back-off, activeDeadlineSeconds) are re-checked by the periodic resync.
Pods that lost their Job (orphaned, or the Job finished or vanished) get their tracking finalizer removed
so they can go away, like upstream's orphan queue.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ... import errors
from ...meta import controller_ref
from ...resources import ResourceType, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from .admission import admit_job
from .conditions import is_finished
from .failures import BackoffRecord
from .pods import TRACKING_FINALIZER, has_tracking_finalizer, new_pod
from .sync import sync_job

if TYPE_CHECKING:
    from ...services import ClusterServices

log = logging.getLogger(__name__)

COMPONENT = "job-controller"
# Work-queue keys are (namespace, name) of Jobs; this marker (not a valid namespace name) keys a pod whose
# tracking finalizer may need releasing: (ORPHAN_POD, "<namespace>/<name>").
ORPHAN_POD = "#orphan-pod"


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


JOBS = _rt("batch", "v1", "jobs")
PODS = _rt("", "v1", "pods")


class JobController(Controller):
    name = "job-controller"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        # Per Job key: (uid, record); like upstream's backoffStore, dropped when the Job finishes or goes.
        self._backoffs: dict[ObjKey, tuple[str, BackoffRecord]] = {}
        # Pods by the uid of their controller (an informer's index): a sync reads its own pods without
        # walking the namespace; with 200 Jobs that walk per sync was what stalled the event loop.
        self._pods_by_owner: dict[str, set[ObjKey]] = {}
        self._owner_of: dict[ObjKey, str] = {}
        # Inputs of each Job's last sync when it changed nothing: the periodic resync (every 0.5 s for
        # every unfinished Job) then skips it instead of re-running 200 identical syncs per period.
        self._idle: dict[ObjKey, tuple[object, ...] | None] = {}

    # -- wiring ------------------------------------------------------------------------------------
    def attach(self) -> None:
        self.cluster.register_admission(JOBS, admit_job)
        for pod in self.store.iter(PODS):
            self._index(pod, deleted=False)
        self.store.add_listener(self._index_change)  # before the work queue's listener: syncs see it

    def _index_change(self, change: Change) -> None:
        if change.storage_key == PODS.storage_key:
            self._index(change.obj, change.type == "DELETED")

    def _index(self, pod: Obj, deleted: bool) -> None:
        key = (pod["metadata"].get("namespace", ""), pod["metadata"]["name"])
        old = self._owner_of.pop(key, None)
        if old is not None:
            owned = self._pods_by_owner.get(old, set())
            owned.discard(key)
            if not owned:
                self._pods_by_owner.pop(old, None)
        uid = (controller_ref(pod) or {}).get("uid")
        if uid and not deleted:
            self._owner_of[key] = uid
            self._pods_by_owner.setdefault(uid, set()).add(key)

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == JOBS.storage_key:
            return [(change.namespace, change.obj["metadata"]["name"])]
        if change.storage_key == PODS.storage_key:
            return list(self._keys_for_pod(change))
        return []

    def _keys_for_pod(self, change: Change) -> Iterable[ObjKey]:
        pod = change.obj
        job = self._owning_job(pod)
        if job is not None:
            yield (job["metadata"]["namespace"], job["metadata"]["name"])
        elif change.type != "DELETED" and has_tracking_finalizer(pod):
            yield (ORPHAN_POD, f"{change.namespace}/{pod['metadata']['name']}")

    def all_keys(self) -> Iterable[ObjKey]:
        """Unfinished Jobs only: finished ones have nothing time-based left (TTL has its own controller)."""
        return [
            (j["metadata"]["namespace"], j["metadata"]["name"])
            for j in self.store.iter(JOBS)
            if not is_finished(j)
        ]

    async def reconcile(self, key: ObjKey) -> None:
        if key[0] == ORPHAN_POD:
            namespace, _, name = key[1].partition("/")
            self._release_orphan(namespace, name)
            return
        job = self.store.find(JOBS, key[0], key[1])
        if job is None:
            self._backoffs.pop(key, None)
            self._idle.pop(key, None)
            return
        if is_finished(job):
            self._backoffs.pop(key, None)
            self._release_all(job)
            return
        if job["spec"].get("completionMode") not in ("NonIndexed", "Indexed"):
            self.event(
                job, "Warning", "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown"
            )
            return
        inputs = self._inputs(job)
        if self._idle.get(key) == inputs and not self._time_rules(key, job):
            return  # the last sync of exactly these inputs changed nothing, and no time-based rule applies
        before = self.store.resource_version
        sync_job(self, job)
        self._idle[key] = inputs if self.store.resource_version == before else None

    def _inputs(self, job: Obj) -> tuple[object, ...]:
        """Versions of what a sync reads: the Job and the pods it controls."""
        owned = sorted(self._pods_by_owner.get(job["metadata"]["uid"], ()))
        pods = [self.store.find(PODS, *k) for k in owned]
        versions = tuple((p["metadata"]["uid"], p["metadata"].get("resourceVersion")) for p in pods if p)
        return (job["metadata"]["uid"], job["metadata"].get("resourceVersion"), versions)

    def _time_rules(self, key: ObjKey, job: Obj) -> bool:
        """Whether a sync may act on time alone: activeDeadlineSeconds, or a replacement held by back-off."""
        return bool(job["spec"].get("activeDeadlineSeconds")) or key in self._backoffs

    def _owning_job(self, pod: Obj) -> Obj | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
            return None
        owner = self.store.by_uid(ref.get("uid", ""))
        return owner if owner is not None and owner.get("kind") == "Job" else None

    def _release_orphan(self, namespace: str, name: str) -> None:
        """``syncOrphanPod``: release unless an unfinished Job (or another kind) still controls it."""
        pod = self.store.find(PODS, namespace, name)
        if pod is None or not has_tracking_finalizer(pod):
            return
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return
            job = self._owning_job(pod)
            if job is not None and not is_finished(job):
                return
        self.release_pod(pod)

    def _release_all(self, job: Obj) -> None:
        """``cleanupPodFinalizers``: a finished Job's pods keep no tracking finalizer."""
        for pod in self.pods_of(job):
            if has_tracking_finalizer(pod):
                self.release_pod(pod)

    # -- JobOps: what a sync does to the cluster ---------------------------------------------------
    @property
    def backoff_base(self) -> float:
        return self.settings.job_backoff_base

    @property
    def backoff_cap(self) -> float:
        return self.settings.job_backoff_cap

    def now(self) -> float:
        return self.settings.clock.now()

    def pods_of(self, job: Obj) -> list[Obj]:
        """Pods this Job controls (by controller ownerReference; orphans are not adopted)."""
        job_uid = job["metadata"]["uid"]
        pods = [self.store.find(PODS, *key) for key in sorted(self._pods_by_owner.get(job_uid, ()))]
        return [p for p in pods if p is not None and (controller_ref(p) or {}).get("uid") == job_uid]

    def create_pod(self, job: Obj, index: int | None) -> bool:
        try:
            pod = self.cluster.admit(PODS, new_pod(job, index), None)
            created = self.store.create(PODS, pod)
        except errors.StatusError as exc:
            if "being terminated" not in exc.message:
                self.event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            return False
        self.event(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        return True

    def delete_pod(self, job: Obj, pod: Obj, keep_finalizer: bool) -> bool:
        """Delete a pod; without ``keep_finalizer`` its finalizer goes first (it will not be counted)."""
        meta = pod["metadata"]
        if not keep_finalizer and not self.release_pod(pod):
            return False
        try:
            self.store.delete(PODS, meta["namespace"], meta["name"])
        except errors.StatusError as exc:
            if exc.code != 404:
                self.event(job, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
                return False
        self.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")
        return True

    def release_pod(self, pod: Obj) -> bool:
        """Remove the tracking finalizer (a pod already gone counts as released)."""
        meta = pod["metadata"]

        def drop(obj: Obj) -> None:
            if obj["metadata"].get("uid") != meta.get("uid"):
                return
            finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != TRACKING_FINALIZER]
            if finalizers:
                obj["metadata"]["finalizers"] = finalizers
            else:
                obj["metadata"].pop("finalizers", None)

        self.store.mutate(PODS, meta["namespace"], meta["name"], drop)
        return True

    def write_status(self, job: Obj, status: Obj) -> None:
        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == job["metadata"]["uid"]:
                obj["status"] = status

        self.store.mutate(JOBS, job["metadata"]["namespace"], job["metadata"]["name"], put)

    def backoff(self, job: Obj) -> BackoffRecord:
        job_uid, record = self._backoffs.get(_key_of(job), ("", BackoffRecord()))
        return record if job_uid == job["metadata"]["uid"] else BackoffRecord()

    def set_backoff(self, job: Obj, record: BackoffRecord) -> None:
        self._backoffs[_key_of(job)] = (job["metadata"]["uid"], record)

    def event(self, job: Obj, type_: str, reason: str, message: str) -> None:
        self.cluster.events.record(job, type_, reason, message, COMPONENT)


def _key_of(obj: Obj) -> ObjKey:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])
