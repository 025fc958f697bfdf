"""The trainer.kubeflow.org/v1alpha1 TrainJob controller, served natively: wiring and I/O only.

Mirrors pkg/controller/trainjob_controller.go: skip TrainJobs another manager owns; fail one whose runtime
kind is not supported; otherwise, while not finished, make the JobSet exist (rendered by :mod:`.render`
from the runtime; afterwards only its ``suspend`` follows the TrainJob, as upstream's Build skips a JobSet
that exists and is not suspended); then the status (:mod:`.status`) and the active deadline, which fails the
TrainJob and deletes its JobSet. The default ClusterTrainingRuntimes are installed when the controller
starts (:mod:`.runtimes`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ... import errors
from ...meta import controller_ref
from ...store import Change, Obj
from ..base import Controller, ObjKey
from ..owned import controlled_by, delete_if_present, served, write_status
from . import status as st
from .admission import trainjob_admission
from .api import (
    API_VERSION,
    CLUSTER_TRAINING_RUNTIME,
    CONTROLLER_NAME,
    GROUP,
    KIND,
    RESOURCES_CREATION_FAILED,
    TRAINING_RUNTIME,
    VERSION,
    managed_here,
    runtime_ref,
    supported,
    suspended,
)
from .render import render_jobset
from .runtime_admission import runtime_admission
from .runtimes import default_runtimes
from .snapshot import runtime_from_snapshot, snapshot_configmap, snapshot_name

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


TRAINJOBS = served(GROUP, VERSION, "trainjobs")
TRAINING_RUNTIMES = served(GROUP, VERSION, "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES = served(GROUP, VERSION, "clustertrainingruntimes")
JOBSETS = served("jobset.x-k8s.io", "v1alpha2", "jobsets")
CONFIGMAPS = served("", "v1", "configmaps")


class TrainJobController(Controller):
    name = CONTROLLER_NAME

    def attach(self) -> None:
        self.cluster.register_admission(
            TRAINJOBS,
            trainjob_admission(
                self.find_runtime,
                self.settings.clock.now,
                lambda ns, name: self.store.find(JOBSETS, ns, name),
            ),
        )
        self.cluster.register_admission(TRAINING_RUNTIMES, runtime_admission(TRAINING_RUNTIME))
        self.cluster.register_admission(
            CLUSTER_TRAINING_RUNTIMES, runtime_admission(CLUSTER_TRAINING_RUNTIME)
        )

    async def start(self) -> None:
        self.install_default_runtimes()
        await super().start()

    def install_default_runtimes(self) -> None:
        """Create the shipped ClusterTrainingRuntimes that are missing (idempotent across restarts)."""
        for runtime in default_runtimes():
            if self.store.find(CLUSTER_TRAINING_RUNTIMES, "", runtime["metadata"]["name"]) is None:
                self.store.create(
                    CLUSTER_TRAINING_RUNTIMES, self.cluster.admit(CLUSTER_TRAINING_RUNTIMES, runtime, None)
                )

    def find_runtime(self, kind: str, namespace: str, name: str) -> Obj | None:
        if kind == CLUSTER_TRAINING_RUNTIME:
            return self.store.find(CLUSTER_TRAINING_RUNTIMES, "", name)
        return self.store.find(TRAINING_RUNTIMES, namespace, name)

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == TRAINJOBS.storage_key:
            return [(change.namespace, change.obj["metadata"]["name"])]
        if change.storage_key != JOBSETS.storage_key:
            return []
        owner = controlled_by(change.obj, API_VERSION, KIND)
        return [(change.namespace, owner)] if owner else []

    def all_keys(self) -> Iterable[ObjKey]:
        return [(t["metadata"]["namespace"], t["metadata"]["name"]) for t in self.store.iter(TRAINJOBS)]

    async def reconcile(self, key: ObjKey) -> None:
        tj = self.store.find(TRAINJOBS, *key)
        if tj is None or tj["metadata"].get("deletionTimestamp") or not managed_here(tj):
            return
        tj = copy.deepcopy(tj)
        if supported(tj) and not st.is_finished(tj):
            self._reconcile_jobset(tj)
        jobset = self.store.find(JOBSETS, *key)
        if jobset is not None and (controller_ref(jobset) or {}).get("uid") != tj["metadata"]["uid"]:
            jobset = None
        status, exceeded = st.next_status(tj, jobset, self.settings.clock.now())
        if exceeded:
            delete_if_present(self.store, JOBSETS, *key)
        if status != (tj.get("status") or {}):
            write_status(self.store, TRAINJOBS, tj, status)

    def _reconcile_jobset(self, tj: Obj) -> None:
        """``reconcileObjects``: the runtime (its snapshot, taken now if missing), then the JobSet."""
        namespace, name = tj["metadata"]["namespace"], tj["metadata"]["name"]
        existing = self.store.find(JOBSETS, namespace, name)
        kept = self.store.find(CONFIGMAPS, namespace, snapshot_name(tj))
        held = existing is not None and (suspended(tj) or (existing.get("spec") or {}).get("suspend") is True)
        if existing is not None and kept is not None and not held:
            return  # upstream's Build skips a JobSet that exists and is not suspended
        runtime = self._runtime_for(tj, kept)
        if runtime is None or (existing is not None and not held):
            return
        if existing is not None:
            self._reapply(tj, existing, render_jobset(tj, runtime))
            return
        try:
            self.store.create(JOBSETS, self.cluster.admit(JOBSETS, render_jobset(tj, runtime), None))
        except errors.StatusError as exc:
            if exc.code != 409:
                self._event(tj, exc.message)

    def _reapply(self, tj: Obj, existing: Obj, rendered: Obj) -> None:
        """A suspended JobSet (or one being resumed) is re-applied from the render, as upstream's apply does:
        suspension, and what runtime patches may change while suspended (pod template metadata,
        nodeSelector, tolerations, scheduling gates), through the JobSet webhook's update rules."""
        wanted = copy.deepcopy(existing)
        wanted["spec"] = rendered["spec"]
        try:
            admitted = self.cluster.admit(JOBSETS, wanted, existing)
        except errors.StatusError as exc:
            self._event(tj, exc.message)
            return
        if admitted["spec"] == existing.get("spec"):
            return

        def put(js: Obj) -> None:
            if js["metadata"].get("uid") == existing["metadata"]["uid"]:
                js["spec"] = admitted["spec"]

        self.store.mutate(JOBSETS, existing["metadata"]["namespace"], existing["metadata"]["name"], put)

    def _runtime_for(self, tj: Obj, kept: Obj | None) -> Obj | None:
        """The runtime from its snapshot ``kept``, else from the API (and the snapshot taken now)."""
        namespace = tj["metadata"]["namespace"]
        if kept is not None:
            try:
                return runtime_from_snapshot(tj, kept)
            except ValueError as exc:
                self._event(tj, f"unable to get runtime snapshot: {exc}")
                return None
        ref = runtime_ref(tj)
        runtime = self.find_runtime(str(ref.get("kind")), namespace, str(ref.get("name", "")))
        if runtime is None:
            cluster = ref.get("kind") == CLUSTER_TRAINING_RUNTIME
            plural = "clustertrainingruntimes" if cluster else "trainingruntimes"
            what = (
                "not found ClusterTrainingRuntime specified in TrainJob"
                if cluster
                else "TrainingRuntime specified in TrainJob is not found"
            )
            self._event(tj, f'{what}: {plural}.{GROUP} "{ref.get("name", "")}" not found')
            return None
        try:
            self.store.create(
                CONFIGMAPS, self.cluster.admit(CONFIGMAPS, snapshot_configmap(tj, runtime), None)
            )
        except errors.StatusError as exc:
            self._event(tj, f"creating runtime snapshot: applying runtime snapshot ConfigMap: {exc.message}")
            return None
        return runtime

    def _event(self, tj: Obj, error: str) -> None:
        message = f"TrainJob resources reconciliation failed: {error[:950]}"
        if len(error) > 950:
            message += " ..."
        self.cluster.events.record(tj, "Warning", RESOURCES_CREATION_FAILED, message, CONTROLLER_NAME)


__all__ = ["TrainJobController"]
