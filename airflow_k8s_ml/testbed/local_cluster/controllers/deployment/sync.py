"""One sync of one Deployment, in the order pkg/controller/deployment does it.

``syncDeployment`` -> paused / scaling event -> ``sync`` (proportional scaling), else ``rolloutRolling``
or ``rolloutRecreate``; each ends in a status write. The arithmetic lives in :mod:`.replicas`, the
status rules in :mod:`.status`, revision annotations in :mod:`.revisions`; this module only
sequences them and calls :class:`DeploymentOps` for every write, so it reads like the Go it mirrors.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from ... import errors
from ...meta import controller_ref, owner_reference
from . import replicas as rep
from . import status as st
from .revisions import (
    replicas_annotations_need_update,
    set_deployment_revision,
    set_new_rs_annotations,
    set_replicas_annotations,
)
from .template import equal_ignore_hash, selector_with_hash, template_hash, with_hash

Obj = dict[str, Any]


class DeploymentOps(Protocol):
    """What a sync needs from the cluster (implemented by the controller)."""

    def now(self) -> float: ...

    def create_rs(self, rs: Obj) -> Obj: ...

    def find_rs(self, namespace: str, name: str) -> Obj | None: ...

    def update_rs(self, rs: Obj) -> Obj: ...

    def delete_rs(self, rs: Obj) -> None: ...

    def write_deployment(self, deployment: Obj) -> None: ...

    def pods_by_rs(self, deployment: Obj, replicasets: list[Obj]) -> dict[str, list[Obj]]: ...

    def event(self, deployment: Obj, type_: str, reason: str, message: str) -> None: ...


class DeploymentSync:
    def __init__(self, ops: DeploymentOps, deployment: Obj, replicasets: list[Obj]) -> None:
        self.ops = ops
        self.d = deployment
        self.rss = list(replicasets)

    # -- entry point -----------------------------------------------------------------------------------
    def run(self) -> None:
        d = self.d
        if (d.get("metadata") or {}).get("deletionTimestamp"):
            new_rs, old_rss = self.get_all(create=False)
            self.sync_status(self._all(old_rss, new_rs), new_rs)
            return
        self.check_paused_conditions()
        if (d.get("spec") or {}).get("paused") or self.is_scaling_event():
            self.sync()
        elif ((d.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate":
            self.rollout_recreate()
        else:
            self.rollout_rolling()

    @staticmethod
    def _all(old_rss: list[Obj], new_rs: Obj | None) -> list[Obj | None]:
        return [*old_rss, new_rs]

    def _remember(self, rs: Obj) -> Obj:
        uid = rs["metadata"]["uid"]
        self.rss = [rs if r["metadata"]["uid"] == uid else r for r in self.rss]
        if all(r["metadata"]["uid"] != uid for r in self.rss):
            self.rss.append(rs)
        return rs

    # -- finding the new ReplicaSet --------------------------------------------------------------------
    def find_new_rs(self) -> Obj | None:
        template = (self.d.get("spec") or {}).get("template")
        for rs in sorted(self.rss, key=rep.created_key):
            if equal_ignore_hash((rs.get("spec") or {}).get("template"), template):
                return rs
        return None

    def get_all(self, create: bool) -> tuple[Obj | None, list[Obj]]:
        """``getAllReplicaSetsAndSyncRevision``: (new ReplicaSet or None, every other ReplicaSet)."""
        existing = self.find_new_rs()
        old_rss = [
            rs for rs in self.rss if existing is None or rs["metadata"]["uid"] != existing["metadata"]["uid"]
        ]
        new_rs = self._new_rs(existing, old_rss, create)
        return new_rs, old_rss

    def _new_rs(self, existing: Obj | None, old_rss: list[Obj], create: bool) -> Obj | None:
        new_revision = rep.max_revision(old_rss) + 1
        if existing is not None:
            return self._sync_existing_new_rs(existing, new_revision)
        if not create:
            return None
        return self._create_new_rs(old_rss, new_revision)

    def _sizes(self) -> tuple[int, int]:
        desired = rep.spec_replicas(self.d)
        return desired, desired + rep.max_surge(self.d)

    def _sync_existing_new_rs(self, existing: Obj, new_revision: int) -> Obj:
        rs = copy.deepcopy(existing)
        changed = set_new_rs_annotations(self.d, rs, new_revision, True, *self._sizes())
        min_ready = int((self.d.get("spec") or {}).get("minReadySeconds") or 0)
        if changed or int(rs["spec"].get("minReadySeconds") or 0) != min_ready:
            _set_min_ready(rs, min_ready)
            return self._remember(self.ops.update_rs(rs))
        needs_write = set_deployment_revision(self.d, rs["metadata"]["annotations"].get(rep.REVISION, ""))
        status = self.d.setdefault("status", {})
        if st.has_progress_deadline(self.d) and st.get_condition(status, st.PROGRESSING) is None:
            st.set_condition(
                status,
                st.new_condition(
                    st.PROGRESSING,
                    "True",
                    st.FOUND_NEW_RS,
                    f'Found new replica set "{rs["metadata"]["name"]}"',
                    self.ops.now(),
                ),
            )
            needs_write = True
        if needs_write:
            self.ops.write_deployment(self.d)
        return rs

    def _new_rs_object(self, old_rss: list[Obj], new_revision: int) -> Obj:
        d = self.d
        spec = d.get("spec") or {}
        collision = (d.get("status") or {}).get("collisionCount")
        pod_hash = template_hash(spec.get("template") or {}, collision)
        template = with_hash(spec.get("template") or {}, pod_hash)
        rs: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{d['metadata']['name']}-{pod_hash}",
                "namespace": d["metadata"]["namespace"],
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [owner_reference(d)],
            },
            "spec": {
                "replicas": 0,
                "selector": selector_with_hash(spec.get("selector"), pod_hash),
                "template": template,
            },
        }
        _set_min_ready(rs, int(spec.get("minReadySeconds") or 0))
        rs["spec"]["replicas"] = rep.new_rs_new_replicas(d, [*old_rss, rs], rs)
        set_new_rs_annotations(d, rs, new_revision, False, *self._sizes())
        return rs

    def _create_new_rs(self, old_rss: list[Obj], new_revision: int) -> Obj | None:
        rs = self._new_rs_object(old_rss, new_revision)
        name, replicas = rs["metadata"]["name"], rs["spec"]["replicas"]
        already_exists = False
        try:
            created = self.ops.create_rs(rs)
        except errors.StatusError as exc:
            if exc.code == 409 and exc.reason == "AlreadyExists":
                found = self._adopt_existing(name)
                if found is None:
                    return None
                created, already_exists = found, True
            else:
                self._report_create_failure(name, exc)
                return None
        self._remember(created)
        if not already_exists and replicas > 0:
            self.ops.event(
                self.d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {replicas}"
            )
        needs_write = set_deployment_revision(self.d, str(new_revision))
        if not already_exists and st.has_progress_deadline(self.d):
            st.set_condition(
                self.d.setdefault("status", {}),
                st.new_condition(
                    st.PROGRESSING,
                    "True",
                    st.NEW_RS_CREATED,
                    f'Created new replica set "{name}"',
                    self.ops.now(),
                ),
            )
            needs_write = True
        if needs_write:
            self.ops.write_deployment(self.d)
        return created

    def _adopt_existing(self, name: str) -> Obj | None:
        """The name is taken: ours with the same template (a repeated sync), or a hash collision."""
        existing = self.ops.find_rs(self.d["metadata"]["namespace"], name)
        if existing is not None:
            ref = controller_ref(existing) or {}
            if ref.get("uid") == self.d["metadata"]["uid"] and equal_ignore_hash(
                (self.d.get("spec") or {}).get("template"), (existing.get("spec") or {}).get("template")
            ):
                return existing
        status = self.d.setdefault("status", {})
        status["collisionCount"] = int(status.get("collisionCount") or 0) + 1
        self.ops.write_deployment(self.d)
        return None

    def _report_create_failure(self, name: str, exc: errors.StatusError) -> None:
        if "being terminated" in exc.message:
            return
        message = f'Failed to create new replica set "{name}": {exc.message}'
        if st.has_progress_deadline(self.d):
            st.set_condition(
                self.d.setdefault("status", {}),
                st.new_condition(st.PROGRESSING, "False", st.FAILED_RS_CREATE, message, self.ops.now()),
            )
            self.ops.write_deployment(self.d)
        self.ops.event(self.d, "Warning", st.FAILED_RS_CREATE, message)

    # -- scaling one ReplicaSet ------------------------------------------------------------------------
    def scale_and_record(self, rs: Obj, size: int) -> tuple[bool, Obj]:
        if rep.spec_replicas(rs) == size:
            return False, rs
        return self.scale(rs, size, "up" if rep.spec_replicas(rs) < size else "down")

    def scale(self, rs: Obj, size: int, operation: str) -> tuple[bool, Obj]:
        """``scaleReplicaSet``: resize and refresh the size annotations; event only when the size moved."""
        desired, maximum = self._sizes()
        resize = rep.spec_replicas(rs) != size
        if not resize and not replicas_annotations_need_update(rs, desired, maximum):
            return False, rs
        before = rep.spec_replicas(rs)
        changed = copy.deepcopy(rs)
        changed["spec"]["replicas"] = size
        set_replicas_annotations(changed, desired, maximum)
        updated = self._remember(self.ops.update_rs(changed))
        if resize:
            self.ops.event(
                self.d,
                "Normal",
                "ScalingReplicaSet",
                f"Scaled {operation} replica set {rs['metadata']['name']} from {before} to {size}",
            )
        return resize, updated

    # -- paused and scaling events ---------------------------------------------------------------------
    def check_paused_conditions(self) -> None:
        condition = st.paused_condition(self.d, self.ops.now())
        if condition is not None:
            st.set_condition(self.d.setdefault("status", {}), condition)
            self.ops.write_deployment(self.d)

    def is_scaling_event(self) -> bool:
        new_rs, old_rss = self.get_all(create=False)
        for rs in rep.active(self._all(old_rss, new_rs)):
            desired = rep.annotation_int(rs, rep.DESIRED_REPLICAS)
            if desired is not None and desired != rep.spec_replicas(self.d):
                return True
        return False

    def sync(self) -> None:
        """Scale (proportionally when a rollout is in flight), clean up when paused, write status."""
        new_rs, old_rss = self.get_all(create=False)
        self.proportional_scale(new_rs, old_rss)
        new_rs, old_rss = self._refresh(new_rs, old_rss)
        if (self.d.get("spec") or {}).get("paused"):
            self.cleanup(old_rss)
        self.sync_status(self._all(old_rss, new_rs), new_rs)

    def _refresh(self, new_rs: Obj | None, old_rss: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        by_uid = {rs["metadata"]["uid"]: rs for rs in self.rss}
        fresh_new = by_uid.get(new_rs["metadata"]["uid"], new_rs) if new_rs is not None else None
        return fresh_new, [by_uid.get(rs["metadata"]["uid"], rs) for rs in old_rss]

    def proportional_scale(self, new_rs: Obj | None, old_rss: list[Obj]) -> None:
        latest = rep.find_active_or_latest(new_rs, old_rss)
        if latest is not None:
            if rep.spec_replicas(latest) != rep.spec_replicas(self.d):
                self.scale_and_record(latest, rep.spec_replicas(self.d))
            return
        if rep.is_saturated(self.d, new_rs):
            for old in rep.active(list(old_rss)):
                self.scale_and_record(old, 0)
            return
        if rep.is_rolling(self.d):
            plan, operation = rep.proportional_sizes(self.d, rep.active(self._all(old_rss, new_rs)))
            for rs, size in plan:
                self.scale(rs, size, operation)

    # -- rolling update --------------------------------------------------------------------------------
    def rollout_rolling(self) -> None:
        new_rs, old_rss = self.get_all(create=True)
        if new_rs is None:
            return
        all_rss = self._all(old_rss, new_rs)
        if self.reconcile_new_rs(all_rss, new_rs) or self.reconcile_old_rss(all_rss, old_rss, new_rs):
            self.sync_rollout_status(all_rss, new_rs)
            return
        if st.deployment_complete(self.d, self.d.get("status") or {}):
            self.cleanup(old_rss)
        self.sync_rollout_status(all_rss, new_rs)

    def reconcile_new_rs(self, all_rss: list[Obj | None], new_rs: Obj) -> bool:
        desired, current = rep.spec_replicas(self.d), rep.spec_replicas(new_rs)
        if current == desired:
            return False
        if current > desired:
            return self.scale_and_record(new_rs, desired)[0]
        return self.scale_and_record(new_rs, rep.new_rs_new_replicas(self.d, all_rss, new_rs))[0]

    def reconcile_old_rss(self, all_rss: list[Obj | None], old_rss: list[Obj], new_rs: Obj) -> bool:
        """Remove unhealthy old pods first, then available ones down to minAvailable."""
        old_active = rep.active(list(old_rss))
        if rep.total_spec(list(old_active)) == 0:
            return False
        budget = rep.max_scaled_down(self.d, all_rss, new_rs)
        if budget <= 0:
            return False
        cleaned = 0
        for rs, size in rep.unhealthy_cleanup_plan(old_active, budget):
            cleaned += rep.spec_replicas(rs) - size
            self.scale_and_record(rs, size)
        old_active = [self._current(rs) for rs in old_active]
        scaled = 0
        for rs, size in rep.rolling_scale_down_plan(self.d, self._all(old_active, new_rs), old_active):
            scaled += rep.spec_replicas(rs) - size
            self.scale_and_record(rs, size)
        return cleaned + scaled > 0

    def _current(self, rs: Obj) -> Obj:
        return next((r for r in self.rss if r["metadata"]["uid"] == rs["metadata"]["uid"]), rs)

    # -- recreate --------------------------------------------------------------------------------------
    def rollout_recreate(self) -> None:
        new_rs, old_rss = self.get_all(create=False)
        all_rss = self._all(old_rss, new_rs)
        scaled_down = False
        for rs in rep.active(list(old_rss)):
            scaled_down = self.scale_and_record(rs, 0)[0] or scaled_down
        if scaled_down or self.old_pods_running(new_rs, old_rss):
            self.sync_rollout_status(all_rss, new_rs)
            return
        if new_rs is None:
            new_rs, old_rss = self.get_all(create=True)
            if new_rs is None:
                return
            all_rss = self._all(old_rss, new_rs)
        self.scale_and_record(new_rs, rep.spec_replicas(self.d))
        if st.deployment_complete(self.d, self.d.get("status") or {}):
            self.cleanup(old_rss)
        self.sync_rollout_status(all_rss, new_rs)

    def old_pods_running(self, new_rs: Obj | None, old_rss: list[Obj]) -> bool:
        """Recreate waits until no pod of an old ReplicaSet is Pending or Running any more."""
        if rep.total_status(list(old_rss), "replicas") > 0:
            return True
        new_uid = new_rs["metadata"]["uid"] if new_rs is not None else None
        for rs_uid, pods in self.ops.pods_by_rs(self.d, self.rss).items():
            if rs_uid == new_uid:
                continue
            if any((p.get("status") or {}).get("phase") not in ("Failed", "Succeeded") for p in pods):
                return True
        return False

    # -- history and status ----------------------------------------------------------------------------
    def cleanup(self, old_rss: list[Obj]) -> None:
        for rs in rep.history_to_delete(self.d, old_rss):
            self.ops.delete_rs(rs)

    def sync_status(self, all_rss: list[Obj | None], new_rs: Obj | None) -> None:
        """``syncDeploymentStatus``: counters and Available only."""
        self._write_status(st.calculate_status(all_rss, new_rs, self.d, self.ops.now()))

    def sync_rollout_status(self, all_rss: list[Obj | None], new_rs: Obj | None) -> None:
        self._write_status(st.rollout_status(all_rss, new_rs, self.d, self.ops.now()))

    def _write_status(self, status: Obj) -> None:
        if status == (self.d.get("status") or {}):
            return
        self.d["status"] = status
        self.ops.write_deployment(self.d)


def _set_min_ready(rs: Obj, seconds: int) -> None:
    if seconds:
        rs["spec"]["minReadySeconds"] = seconds
    else:
        rs["spec"].pop("minReadySeconds", None)
