"""The batch/v1 CronJob controller: admission plus a reconcile loop running :func:`sync.sync`, as
kube-controller-manager's cronjob controller (v2) does.

Upstream syncs a CronJob when it or one of its Jobs changes, and otherwise at the time its sync asked
for (the next schedule time + 100 ms, via a delaying queue). Here every sync records that due time on
``settings.clock`` and the periodic resync only wakes CronJobs that are due, so a test that moves a
``FakeClock`` sees the same syncs a real cluster would make over those minutes, and no extra ones
(extra syncs would repeat events such as ``JobAlreadyActive``). A schedule or time zone change does not
sync at once but at the new schedule's next time, like upstream's ``updateCronJob``.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.k8s.cron import ScheduleError, format_schedule, parse_standard

from ...meta import controller_ref
from ...resources import ResourceType, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from .admission import admit_cronjob
from .jobs import is_child_of
from .schedule import next_schedule_delay
from .sync import SyncError, earliest_time, sync

if TYPE_CHECKING:
    from ...services import ClusterServices

log = logging.getLogger(__name__)

COMPONENT = "cronjob-controller"
# Work-queue marker (not a valid namespace) for "the schedule changed": (RESCHEDULE, "<namespace>/<name>").
RESCHEDULE = "#reschedule"
# Rate-limited retry after a failed sync (workqueue's default per-item back-off: 5 ms doubling, cap 1000 s).
_RETRY_BASE, _RETRY_CAP = 0.005, 1000.0


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


CRONJOBS = _rt("batch", "v1", "cronjobs")
JOBS = _rt("batch", "v1", "jobs")


class CronJobController(Controller):
    name = "cronjob-controller"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self._due: dict[ObjKey, float] = {}  # clock time of the next sync the last one asked for
        self._failures: dict[ObjKey, int] = {}

    # -- wiring ------------------------------------------------------------------------------------
    def attach(self) -> None:
        self.cluster.register_admission(CRONJOBS, admit_cronjob)

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == CRONJOBS.storage_key:
            name = change.obj["metadata"]["name"]
            if change.type == "MODIFIED" and _schedule_changed(change.old, change.obj):
                yield (RESCHEDULE, f"{change.namespace}/{name}")
            else:
                yield (change.namespace, name)
        elif change.storage_key == JOBS.storage_key:
            yield from self._keys_for_job(change)

    def _keys_for_job(self, change: Change) -> Iterable[ObjKey]:
        """``addJob``/``updateJob``/``deleteJob``: wake the CronJob controlling the Job (and the one
        that controlled it before, when the controller reference changed)."""
        refs = [controller_ref(change.obj)]
        if change.old is not None and controller_ref(change.old) != refs[0]:
            refs.append(controller_ref(change.old))
        for ref in refs:
            owner = self._resolve(change.namespace, ref)
            if owner is not None:
                yield (change.namespace, owner["metadata"]["name"])

    def _resolve(self, namespace: str, ref: dict[str, Any] | None) -> Obj | None:
        """``resolveControllerRef``: a CronJob of that name and uid in the Job's namespace."""
        if ref is None or ref.get("kind") != "CronJob":
            return None
        owner = self.store.by_uid(ref.get("uid", ""))
        if owner is None or owner.get("kind") != "CronJob":
            return None
        meta = owner["metadata"]
        return owner if meta.get("namespace") == namespace and meta["name"] == ref.get("name") else None

    def all_keys(self) -> Iterable[ObjKey]:
        """CronJobs whose requested sync time has come (never-synced ones are due at once)."""
        now = self.settings.clock.now()
        keys = [(cj["metadata"]["namespace"], cj["metadata"]["name"]) for cj in self.store.iter(CRONJOBS)]
        return [key for key in keys if self._due.get(key, now) <= now]

    # -- reconcile ---------------------------------------------------------------------------------
    async def reconcile(self, key: ObjKey) -> None:
        if key[0] == RESCHEDULE:
            namespace, _, name = key[1].partition("/")
            self._reschedule((namespace, name))
            return
        cronjob = self.store.find(CRONJOBS, key[0], key[1])
        if cronjob is None:
            self._due.pop(key, None)
            self._failures.pop(key, None)
            return
        now = self.settings.clock.now()
        before = copy.deepcopy(cronjob.get("status"))
        try:
            requeue = sync(self, cronjob, self._children(cronjob), datetime.fromtimestamp(now, UTC))
        except SyncError as exc:
            log.info("cronjob %s/%s: %s; retrying", key[0], key[1], exc)
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
            requeue = min(_RETRY_BASE * 2**failures, _RETRY_CAP)
        else:
            self._failures.pop(key, None)
        finally:
            if cronjob.get("status") != before:
                self._write_status(cronjob)
        self._due[key] = math.inf if requeue is None else now + requeue

    def _reschedule(self, key: ObjKey) -> None:
        """``updateCronJob`` after a schedule/timeZone change: sync at the new schedule's next time (or
        earlier, if a sync was already due earlier)."""
        cronjob = self.store.find(CRONJOBS, key[0], key[1])
        if cronjob is None:
            return
        spec = cronjob["spec"]
        try:
            schedule = parse_standard(format_schedule(spec.get("schedule") or "", spec.get("timeZone")))
        except ScheduleError:
            self.event(
                cronjob,
                "Warning",
                "UnParseableCronJobSchedule",
                f"unparseable schedule for cronjob: {spec.get('schedule')}",
            )
            return
        now = self.settings.clock.now()
        delay = next_schedule_delay(earliest_time(cronjob), datetime.fromtimestamp(now, UTC), schedule)
        if delay is not None:
            self._due[key] = min(self._due.get(key, math.inf), now + delay)

    def _children(self, cronjob: Obj) -> list[Obj]:
        return [
            copy.deepcopy(job)
            for job in self.store.iter(JOBS, cronjob["metadata"]["namespace"])
            if is_child_of(job, cronjob)
        ]

    def _write_status(self, cronjob: Obj) -> None:
        meta = cronjob["metadata"]

        def put(obj: Obj) -> None:
            if obj["metadata"].get("uid") == meta.get("uid"):
                obj["status"] = cronjob["status"]

        self.store.mutate(CRONJOBS, meta["namespace"], meta["name"], put)

    # -- CronJobOps --------------------------------------------------------------------------------
    def event(self, cronjob: Obj, type_: str, reason: str, message: str) -> None:
        self.cluster.events.record(cronjob, type_, reason, message, COMPONENT)

    def get_job(self, namespace: str, name: str) -> Obj | None:
        return self.store.find(JOBS, namespace, name)

    def create_job(self, job: Obj) -> Obj:
        return self.store.create(JOBS, self.cluster.admit(JOBS, job, None))

    def delete_job(self, job: Obj) -> None:
        meta = job["metadata"]
        self.store.delete(JOBS, meta["namespace"], meta["name"], propagation="Background")


def _schedule_changed(old: Obj | None, new: Obj) -> bool:
    if old is None:
        return False
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    return any(old_spec.get(f) != new_spec.get(f) for f in ("schedule", "timeZone"))


__all__ = ["CronJobController"]
