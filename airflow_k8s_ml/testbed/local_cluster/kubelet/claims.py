"""PersistentVolumeClaims bound to a directory: what a dynamic provisioner plus the PV controller do.

A claim is Bound as soon as it exists (capacity = its request, volume ``pvc-<uid>``); its data lives in
``<state dir>/pvc/<namespace>/<claim>``, created on first use by a pod and kept across pods and cluster
restarts. Deleting the claim deletes the directory (reclaim policy Delete, the default of dynamically
provisioned volumes) unless a running pod still uses it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..controllers.base import Controller, ObjKey
from ..resources import lookup
from ..store import Change, Obj
from .fit import holds_resources
from .volumes import claim_dir

if TYPE_CHECKING:
    from ..services import ClusterServices

CLAIMS = lookup("", "v1", "persistentvolumeclaims")
PODS = lookup("", "v1", "pods")


class ClaimBinder(Controller):
    name = "persistentvolume-binder"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self._deleted: set[ObjKey] = set()

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key != ("", "persistentvolumeclaims"):
            return ()
        key = (change.namespace, change.obj["metadata"]["name"])
        if change.type == "DELETED":
            self._deleted.add(key)
        return (key,)

    def all_keys(self) -> Iterable[ObjKey]:
        assert CLAIMS is not None
        return [
            (c["metadata"]["namespace"], c["metadata"]["name"])
            for c in self.store.iter(CLAIMS)
            if (c.get("status") or {}).get("phase") != "Bound"
        ]

    async def reconcile(self, key: ObjKey) -> None:
        assert CLAIMS is not None
        claim = self.store.find(CLAIMS, *key)
        if claim is None:
            if key in self._deleted and not self._in_use(*key):
                self._deleted.discard(key)
                shutil.rmtree(claim_dir(self.settings.state_dir, *key), ignore_errors=True)
            return
        self._deleted.discard(key)
        if (claim.get("status") or {}).get("phase") != "Bound":
            self.store.mutate(CLAIMS, *key, _bind)

    def _in_use(self, namespace: str, name: str) -> bool:
        assert PODS is not None
        for pod in self.store.iter(PODS, namespace):
            claims = {
                (v.get("persistentVolumeClaim") or {}).get("claimName")
                for v in (pod.get("spec") or {}).get("volumes") or []
            }
            if name in claims and holds_resources(pod, (pod.get("spec") or {}).get("nodeName", "")):
                return True
        return False


def _bind(claim: Obj) -> None:
    spec = claim.setdefault("spec", {})
    spec.setdefault("volumeName", f"pvc-{claim['metadata']['uid']}")
    spec.setdefault("volumeMode", "Filesystem")
    annotations = claim["metadata"].setdefault("annotations", {})
    annotations.setdefault("pv.kubernetes.io/bind-completed", "yes")
    annotations.setdefault("pv.kubernetes.io/bound-by-controller", "yes")
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    claim["status"] = {
        "phase": "Bound",
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        **({"capacity": {"storage": storage}} if storage else {}),
    }
