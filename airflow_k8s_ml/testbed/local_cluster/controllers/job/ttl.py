"""TTL-after-finished (pkg/controller/ttlafterfinished): delete a finished Job, Foreground so that its
pods go first, once ``ttlSecondsAfterFinished`` has passed since its Complete/Failed condition's
lastTransitionTime. Time comes from ``settings.clock`` so tests can move it instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ... import errors
from ...meta import parse_time
from ...resources import lookup
from ...store import Change
from ..base import Controller, ObjKey
from .conditions import terminal_condition

JOBS = lookup("batch", "v1", "jobs")


def expires_at(job: Mapping[str, Any]) -> float | None:
    """When the Job may be deleted, or None (no TTL, not finished, or already being deleted)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or (job.get("metadata") or {}).get("deletionTimestamp"):
        return None
    condition = terminal_condition(job)
    if condition is None or not condition.get("lastTransitionTime"):
        return None
    return parse_time(condition["lastTransitionTime"]) + float(ttl)


class TTLAfterFinishedController(Controller):
    name = "ttl-after-finished-controller"

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        assert JOBS is not None
        if change.storage_key == JOBS.storage_key and change.type != "DELETED" and expires_at(change.obj):
            yield (change.namespace, change.obj["metadata"]["name"])

    def all_keys(self) -> Iterable[ObjKey]:
        assert JOBS is not None
        return [
            (j["metadata"]["namespace"], j["metadata"]["name"])
            for j in self.store.iter(JOBS)
            if expires_at(j) is not None
        ]

    async def reconcile(self, key: ObjKey) -> None:
        assert JOBS is not None
        job = self.store.find(JOBS, key[0], key[1])
        if job is None:
            return
        deadline = expires_at(job)
        if deadline is None or self.settings.clock.now() < deadline:
            return
        try:
            self.store.delete(
                JOBS, key[0], key[1], propagation="Foreground", precondition_uid=job["metadata"]["uid"]
            )
        except errors.StatusError as exc:
            if exc.code not in (404, 409):
                raise
