"""Services: admission (defaults, ClusterIP allocation), the endpoints and endpointslice controllers, and the
service proxy.

The endpoints controller keeps one Endpoints object per Service with a selector (Services without one keep
user-managed Endpoints, as upstream) and deletes it with the Service; the EndpointSlices of the same pods
are kept next to it (:mod:`.endpointslices`) and go with the Service through their ownerReference. A pod
change wakes only the Services of its namespace whose selector matches its old or new labels. The proxy
handlers live in :mod:`.proxy`; this controller registers them and closes their session on stop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow_k8s_ml.k8s.selectors import label_selector_from_set

from ... import errors
from ...resources import ResourceType, lookup
from ...store import Change, Obj
from ..base import Controller, ObjKey
from .admission import Allocator, admit_service
from .endpoints import endpoints_for
from .endpointslices import MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL, plan
from .proxy import ProxyHandlers

if TYPE_CHECKING:
    from ...services import ClusterServices


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


SERVICES = _rt("", "v1", "services")
ENDPOINTS = _rt("", "v1", "endpoints")
PODS = _rt("", "v1", "pods")
ENDPOINT_SLICES = lookup("discovery.k8s.io", "v1", "endpointslices")


class ServiceController(Controller):
    name = "endpoint-controller"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self.proxy = ProxyHandlers(cluster)

    def attach(self) -> None:
        allocator = Allocator(self._used_ips, self._used_node_ports)
        self.cluster.register_admission(SERVICES, admit_service(allocator))
        self.proxy.register()

    def _used_ips(self) -> set[str]:
        return {
            ip for svc in self.store.iter(SERVICES) for ip in (svc.get("spec") or {}).get("clusterIPs") or []
        }

    def _used_node_ports(self) -> set[int]:
        return {
            int(p["nodePort"])
            for svc in self.store.iter(SERVICES)
            for p in (svc.get("spec") or {}).get("ports") or []
            if p.get("nodePort")
        }

    async def on_stop(self) -> None:
        await self.proxy.close()

    # -- what to reconcile -------------------------------------------------------------------------------
    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        if change.storage_key == SERVICES.storage_key:
            yield (change.namespace, change.obj["metadata"]["name"])
        elif change.storage_key == PODS.storage_key:
            labels = [(o.get("metadata") or {}).get("labels") or {} for o in (change.obj, change.old) if o]
            for svc in self.store.iter(SERVICES, change.namespace):
                selector = (svc.get("spec") or {}).get("selector")
                if selector and any(label_selector_from_set(selector).matches(lb) for lb in labels):
                    yield (change.namespace, svc["metadata"]["name"])

    def all_keys(self) -> Iterable[ObjKey]:
        return [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in self.store.iter(SERVICES)]

    async def reconcile(self, key: ObjKey) -> None:
        namespace, name = key
        service = self.store.find(SERVICES, namespace, name)
        if service is None:
            self._delete_endpoints(namespace, name)
            return
        if not (service.get("spec") or {}).get("selector") or service["metadata"].get("deletionTimestamp"):
            return
        pods = list(self.store.iter(PODS, namespace))
        self._apply(endpoints_for(service, pods))
        if ENDPOINT_SLICES is not None:
            self._apply_slices(ENDPOINT_SLICES, service, pods)

    def _apply(self, wanted: Obj) -> None:
        meta = wanted["metadata"]
        current = self.store.find(ENDPOINTS, meta["namespace"], meta["name"])
        if current is None:
            try:
                self.store.create(ENDPOINTS, wanted)
            except errors.StatusError as exc:
                if exc.code not in (403, 404, 409):  # namespace going away, or a concurrent create
                    raise
            return

        def put(obj: Obj) -> None:
            labels = meta.get("labels")
            if labels:
                obj["metadata"]["labels"] = labels
            else:
                obj["metadata"].pop("labels", None)
            if wanted.get("subsets"):
                obj["subsets"] = wanted["subsets"]
            else:
                obj.pop("subsets", None)

        self.store.mutate(ENDPOINTS, meta["namespace"], meta["name"], put)

    def _apply_slices(self, rt: ResourceType, service: Obj, pods: list[Obj]) -> None:
        namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
        existing = [
            s
            for s in self.store.iter(rt, namespace)
            if (s["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) == name
            and (s["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
        ]
        creates, updates, deletes = plan(service, pods, existing)
        for body in creates:
            try:
                self.store.create(rt, body)
            except errors.StatusError as exc:
                if exc.code not in (403, 404, 409):
                    raise
        for current, wanted in updates:

            def put(obj: Obj, wanted: Obj = wanted) -> None:
                obj["metadata"]["labels"] = wanted["metadata"]["labels"]
                obj["endpoints"] = wanted["endpoints"]

            self.store.mutate(rt, namespace, current["metadata"]["name"], put)
        for stale in deletes:
            try:
                self.store.delete(rt, namespace, stale["metadata"]["name"])
            except errors.StatusError as exc:
                if exc.code != 404:
                    raise

    def _delete_endpoints(self, namespace: str, name: str) -> None:
        try:
            self.store.delete(ENDPOINTS, namespace, name)
        except errors.StatusError as exc:
            if exc.code != 404:
                raise
