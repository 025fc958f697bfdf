"""The jobset.x-k8s.io/v1alpha2 JobSet controller, served natively: wiring and I/O only.

A reconcile reads the JobSet and its child Jobs, asks :func:`.sync.decide` what to do, applies that
(create/delete/suspend/resume Jobs, the headless Service) and writes the status, then records the events
the decision produced. Reconciles follow changes of the JobSet and of the Jobs and Services it controls.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ... import errors
from ...meta import controller_ref
from ...resources import ResourceType
from ...store import Change, Obj
from ..base import Controller, ObjKey
from ..owned import controlled_by, delete_if_present, served, write_status
from .admission import admit_jobset
from .api import (
    API_VERSION,
    CONTROLLER_NAME,
    GROUP,
    HEADLESS_SERVICE_CREATION_FAILED,
    JOB_CREATION_FAILED,
    KIND,
    PLURAL,
    REPLICATED_JOB_NAME_KEY,
    VERSION,
    managed_here,
    subdomain,
)
from .jobs import headless_service, resumed_pod_template
from .sync import decide

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


JOBSETS = served(GROUP, VERSION, PLURAL)
JOBS = served("batch", "v1", "jobs")
SERVICES = served("", "v1", "services")


class JobSetController(Controller):
    name = CONTROLLER_NAME

    def attach(self) -> None:
        self.cluster.register_admission(JOBSETS, admit_jobset)

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == JOBSETS.storage_key:
            return [(change.namespace, change.obj["metadata"]["name"])]
        if change.storage_key not in (JOBS.storage_key, SERVICES.storage_key):
            return []
        owner = controlled_by(change.obj, API_VERSION, KIND)
        return [(change.namespace, owner)] if owner else []

    def all_keys(self) -> Iterable[ObjKey]:
        return [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in self.store.iter(JOBSETS)]

    def _owned(self, rt: ResourceType, js: Obj) -> list[Obj]:
        uid = js["metadata"]["uid"]
        live = self.store.iter(rt, js["metadata"]["namespace"])
        return [copy.deepcopy(o) for o in live if (controller_ref(o) or {}).get("uid") == uid]

    async def reconcile(self, key: ObjKey) -> None:
        js = self.store.find(JOBSETS, *key)
        if js is None or js["metadata"].get("deletionTimestamp") or not managed_here(js):
            return
        js = copy.deepcopy(js)
        decision = decide(js, self._owned(JOBS, js), self.settings.clock.now())
        namespace = key[0]
        for name in decision.delete:
            self._delete_job(namespace, name)
        if decision.service:
            self._ensure_service(js)
        for job in decision.create:
            self._create_job(js, job)
        for name in decision.suspend:
            self._set_suspend(namespace, name, True)
        for name in decision.resume:
            self._resume(js, namespace, name)
        if decision.status != (js.get("status") or {}):
            write_status(self.store, JOBSETS, js, decision.status)
        for type_, reason, message in decision.events:
            self.cluster.events.record(js, type_, reason, message, CONTROLLER_NAME)
        if decision.expired:
            delete_if_present(self.store, JOBSETS, namespace, key[1], propagation="Foreground")

    def _create_job(self, js: Obj, job: Obj) -> None:
        try:
            self.store.create(JOBS, self.cluster.admit(JOBS, job, None))
        except errors.StatusError as exc:
            if exc.code == 409 or "being terminated" in exc.message:
                return
            message = f'job "{job["metadata"]["name"]}" creation failed with error: {exc.message}'
            self.cluster.events.record(js, "Warning", JOB_CREATION_FAILED, message, CONTROLLER_NAME)

    def _delete_job(self, namespace: str, name: str) -> None:
        delete_if_present(self.store, JOBS, namespace, name, propagation="Foreground")

    def _ensure_service(self, js: Obj) -> None:
        namespace = js["metadata"]["namespace"]
        if self.store.find(SERVICES, namespace, subdomain(js)) is not None:
            return
        try:
            self.store.create(SERVICES, self.cluster.admit(SERVICES, headless_service(js), None))
        except errors.StatusError as exc:
            if exc.code != 409 and "being terminated" not in exc.message:
                self.cluster.events.record(
                    js, "Warning", HEADLESS_SERVICE_CREATION_FAILED, exc.message, CONTROLLER_NAME
                )

    def _resume(self, js: Obj, namespace: str, name: str) -> None:
        rjobs = {r.get("name"): r for r in (js.get("spec") or {}).get("replicatedJobs") or []}

        def put(job: Obj) -> None:
            rjob = rjobs.get((job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME_KEY))
            spec = job.setdefault("spec", {})
            if rjob is not None:
                spec["template"] = resumed_pod_template(spec.get("template") or {}, rjob)
            spec["suspend"] = False

        self.store.mutate(JOBS, namespace, name, put)

    def _set_suspend(self, namespace: str, name: str, value: bool) -> None:
        def put(job: Obj) -> None:
            job.setdefault("spec", {})["suspend"] = value

        self.store.mutate(JOBS, namespace, name, put)


__all__ = ["JobSetController"]
