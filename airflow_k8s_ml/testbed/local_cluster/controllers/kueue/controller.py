"""Kueue on the local cluster: wiring and I/O only.

Two kinds of work keys: one per queued job (``(namespace, "<plural>/<name>")``: keep its Workload in step
with it, as upstream's jobframework reconciler: create it, suspend or resume the job as the Workload is
admitted or evicted, mark it finished, delete it with its job) and one scheduling pass over all queues
(:func:`.scheduling.schedule`), run after any change of a Workload, queue, flavor or namespace.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable

from ... import errors
from ...meta import controller_ref
from ...store import Change, Obj
from ..base import Controller, ObjKey
from ..owned import delete_if_present, served, write_status
from .api import (
    CLUSTER_QUEUES,
    CONTROLLER_NAME,
    GROUP,
    LOCAL_QUEUES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    VERSION,
    WORKLOADS,
)
from .convert import convert
from .defaults import default_objects
from .integrations import (
    INTEGRATIONS,
    JOBSETS,
    TRAINJOB,
    Integration,
    apply_node_selector,
    by_storage_key,
    finished,
    is_suspended,
    managed,
    pod_sets,
    pods_ready,
    set_suspended,
)
from .scheduling import schedule
from .visibility import register_visibility
from .webhook import default_cluster_queue, suspend_queued, validate_local_queue
from .workloads import (
    finished_status,
    has_reservation,
    is_admitted,
    is_evicted,
    is_finished,
    new_workload,
    pods_ready_status,
    released_status,
)

log = logging.getLogger(__name__)

NAMESPACES = served("", "v1", "namespaces")
SCHEDULE: ObjKey = ("", "*schedule")
_QUEUE_KEYS = {
    rt.storage_key for rt in (CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, NAMESPACES, WORKLOADS)
}


class KueueController(Controller):
    name = CONTROLLER_NAME

    def attach(self) -> None:
        for integration in INTEGRATIONS:
            self.cluster.register_admission(integration.rt, suspend_queued(integration))
        self.cluster.register_admission(CLUSTER_QUEUES, default_cluster_queue)
        self.cluster.register_admission(LOCAL_QUEUES, validate_local_queue)
        for rt in (RESOURCE_FLAVORS, CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS, PRIORITY_CLASSES):
            self.cluster.register_converter(rt, convert)  # v1beta1 <-> v1beta2 (storage)
        register_visibility(self.cluster)

    async def start(self) -> None:
        self.install_default_queue()
        await super().start()

    def install_default_queue(self) -> None:
        """Create the default flavor and queues from settings, when missing (idempotent across restarts)."""
        if self.settings.queue_quota is None:
            return
        for plural, obj in default_objects(self.settings.queue_quota):
            rt = served(GROUP, VERSION, plural)
            meta = obj["metadata"]
            if self.store.find(rt, meta.get("namespace", ""), meta["name"]) is None:
                self.store.create(rt, self.cluster.admit(rt, obj, None))

    # -- keys --------------------------------------------------------------------------------------
    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        integration = by_storage_key(change.storage_key)
        if integration is not None:  # the scheduling pass follows from the Workload changes this makes
            if not managed(integration, change.obj):
                return []
            return [(change.namespace, f"{integration.rt.plural}/{change.obj['metadata']['name']}")]
        if change.storage_key == JOBSETS.storage_key:
            owner = controller_ref(change.obj) or {}
            return (
                [(change.namespace, f"trainjobs/{owner['name']}")] if owner.get("kind") == "TrainJob" else []
            )
        if change.storage_key == WORKLOADS.storage_key:
            owner = controller_ref(change.obj) or {}
            found = next((i for i in INTEGRATIONS if i.kind == owner.get("kind")), None)
            job_key = [(change.namespace, f"{found.rt.plural}/{owner['name']}")] if found else []
            return [*job_key, SCHEDULE]
        return [SCHEDULE] if change.storage_key in _QUEUE_KEYS else []

    def all_keys(self) -> Iterable[ObjKey]:
        keys = [
            (o["metadata"]["namespace"], f"{i.rt.plural}/{o['metadata']['name']}")
            for i in INTEGRATIONS
            for o in self.store.iter(i.rt)
            if managed(i, o)
        ]
        return [*keys, SCHEDULE]

    async def reconcile(self, key: ObjKey) -> None:
        if key == SCHEDULE:
            self._schedule()
            return
        plural, _, name = key[1].partition("/")
        integration = next(i for i in INTEGRATIONS if i.rt.plural == plural)
        self._sync_job(integration, key[0], name)

    # -- one job and its Workload ------------------------------------------------------------------
    def _sync_job(self, integration: Integration, namespace: str, name: str) -> None:
        job = self.store.find(integration.rt, namespace, name)
        live = job is not None and not job["metadata"].get("deletionTimestamp")
        uid = job["metadata"]["uid"] if job is not None and live else None
        workload = None
        for wl in list(self.store.iter(WORKLOADS, namespace)):
            ref = controller_ref(wl) or {}
            if ref.get("kind") != integration.kind or ref.get("name") != name:
                continue
            if ref.get("uid") == uid:
                workload = copy.deepcopy(wl)
            else:  # its job is gone (or was recreated): upstream deletes the orphaned Workload
                delete_if_present(self.store, WORKLOADS, namespace, wl["metadata"]["name"])
        if job is None or uid is None or not managed(integration, job):
            return
        job = copy.deepcopy(job)
        if workload is None:
            self._create_workload(integration, job)
            return
        now = self.settings.clock.now()
        done, reason, message = finished(integration, job)
        if done:
            if not is_finished(workload):
                write_status(self.store, WORKLOADS, workload, finished_status(workload, reason, message, now))
            return
        suspended = is_suspended(integration, job)
        if is_evicted(workload) and has_reservation(workload):
            if not suspended:
                self._set_suspended(integration, job, True)
            write_status(self.store, WORKLOADS, workload, released_status(workload, now))
        elif is_admitted(workload) and not is_evicted(workload):
            if suspended:
                self._resume(integration, job, workload)
            else:
                expected = sum(int(p.get("count", 1)) for p in workload["spec"].get("podSets") or [])
                ready = pods_ready(integration, job, expected)
                status = pods_ready_status(workload, ready, now)
                if status != workload.get("status"):
                    write_status(self.store, WORKLOADS, workload, status)
        elif not is_admitted(workload) and not suspended:
            self._set_suspended(integration, job, True)

    def _create_workload(self, integration: Integration, job: Obj) -> None:
        if finished(integration, job)[0]:
            return
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        jobset = None
        if integration is TRAINJOB:
            jobset = self.store.find(JOBSETS, namespace, name)
            if jobset is None:
                return  # its pod sets come from the JobSet the TrainJob controller renders
        priorities = {
            p["metadata"]["name"]: int(p.get("value", 0)) for p in self.store.iter(PRIORITY_CLASSES)
        }
        workload = new_workload(integration, job, pod_sets(integration, job, jobset), priorities)
        try:
            self.store.create(WORKLOADS, self.cluster.admit(WORKLOADS, workload, None))
        except errors.StatusError as exc:
            if exc.code != 409:
                log.warning(
                    "creating workload for %s %s/%s: %s", integration.kind, namespace, name, exc.message
                )
            return
        if not is_suspended(integration, job):
            self._set_suspended(integration, job, True)

    def _resume(self, integration: Integration, job: Obj, workload: Obj) -> None:
        flavors = {f["metadata"]["name"]: f for f in self.store.iter(RESOURCE_FLAVORS)}
        selectors: dict[str, dict[str, str]] = {}
        for assignment in workload["status"]["admission"].get("podSetAssignments") or []:
            labels: dict[str, str] = {}
            for flavor in set((assignment.get("flavors") or {}).values()):
                labels.update(((flavors.get(flavor) or {}).get("spec") or {}).get("nodeLabels") or {})
            selectors[str(assignment.get("name"))] = labels

        def put(current: Obj) -> None:
            if current["metadata"].get("uid") == job["metadata"]["uid"]:
                apply_node_selector(integration, current, selectors)
                set_suspended(integration, current, False)

        self.store.mutate(integration.rt, job["metadata"]["namespace"], job["metadata"]["name"], put)

    def _set_suspended(self, integration: Integration, job: Obj, value: bool) -> None:
        def put(current: Obj) -> None:
            if current["metadata"].get("uid") == job["metadata"]["uid"]:
                set_suspended(integration, current, value)

        self.store.mutate(integration.rt, job["metadata"]["namespace"], job["metadata"]["name"], put)

    # -- the scheduling pass -----------------------------------------------------------------------
    def _schedule(self) -> None:
        workloads = [copy.deepcopy(w) for w in self.store.iter(WORKLOADS)]
        cqs = [copy.deepcopy(c) for c in self.store.iter(CLUSTER_QUEUES)]
        lqs = [copy.deepcopy(q) for q in self.store.iter(LOCAL_QUEUES)]
        namespaces = {
            n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in self.store.iter(NAMESPACES)
        }
        flavors = {f["metadata"]["name"] for f in self.store.iter(RESOURCE_FLAVORS)}
        plan = schedule(cqs, lqs, workloads, namespaces, flavors, self.settings.clock.now())
        by_key = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in workloads}
        for key, status in plan.workloads.items():
            write_status(self.store, WORKLOADS, by_key[key], status)
        for cq in cqs:
            cq_status = plan.cluster_queues.get(cq["metadata"]["name"])
            if cq_status is not None and cq_status != cq.get("status"):
                write_status(self.store, CLUSTER_QUEUES, cq, cq_status)
        for lq in lqs:
            lq_status = plan.local_queues.get((lq["metadata"]["namespace"], lq["metadata"]["name"]))
            if lq_status is not None and lq_status != lq.get("status"):
                write_status(self.store, LOCAL_QUEUES, lq, lq_status)
        for key, type_, reason, message in plan.events:
            self.cluster.events.record(by_key[key], type_, reason, message, CONTROLLER_NAME)


__all__ = ["KueueController"]
