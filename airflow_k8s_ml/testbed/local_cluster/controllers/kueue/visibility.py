"""Kueue's on-demand visibility API (``visibility.kueue.x-k8s.io/v1beta2`` and ``v1beta1``, the same types;
feature VisibilityOnDemand):
``GET .../clusterqueues/{name}/pendingworkloads`` and ``.../namespaces/{ns}/localqueues/{name}/
pendingworkloads`` answer a ``PendingWorkloadsSummary``.

Why: a Workload never says where it stands in its queue; only this API does (upstream's
``pkg/visibility/api/v1beta2`` and ``v1beta1``), and the operators' waits read it to log a queued job's
position.
The positions come from :func:`.scheduling.queue_order`, the order the local scheduler admits in, so
what is shown cannot drift from what happens. Pending, as upstream's ``PendingWorkloadsInfo``: the
ClusterQueue's live workloads without quota reserved, inadmissible ones included.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ... import errors, routing
from ...responses import json_response
from .api import (
    CLUSTER_QUEUES,
    DEFAULT_PENDING_LIMIT,
    LOCAL_QUEUES,
    PENDING_WORKLOADS,
    VERSION,
    VISIBILITY_CLUSTER_QUEUES,
    VISIBILITY_GROUP,
    VISIBILITY_LOCAL_QUEUES,
    WORKLOADS,
)
from .scheduling import queue_order
from .workloads import has_reservation, is_live, priority

if TYPE_CHECKING:
    from ...services import ClusterServices

Obj = dict[str, Any]


def _queue_of(wl: Obj) -> tuple[str, str]:
    return (str(wl["metadata"].get("namespace", "")), str((wl.get("spec") or {}).get("queueName", "")))


def pending_workloads(cluster_queue: str, local_queues: Iterable[Obj], workloads: Iterable[Obj]) -> list[Obj]:
    """The ClusterQueue's pending workloads in admission order (upstream's ``PendingWorkloadsInfo``)."""
    routes = {
        (str(lq["metadata"].get("namespace", "")), str(lq["metadata"]["name"])): str(
            (lq.get("spec") or {}).get("clusterQueue", "")
        )
        for lq in local_queues
    }
    mine = [
        w
        for w in workloads
        if is_live(w) and not has_reservation(w) and routes.get(_queue_of(w)) == cluster_queue
    ]
    return sorted(mine, key=queue_order)


def pending_item(wl: Obj, in_local_queue: int, in_cluster_queue: int) -> Obj:
    """One ``PendingWorkload`` (``newPendingWorkload``): the ownerReferences keep apiVersion, kind, name
    and uid only."""
    meta = wl["metadata"]
    refs = [
        {k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if k in ref}
        for ref in meta.get("ownerReferences") or []
    ]
    item_meta: Obj = {"name": meta["name"], "namespace": meta.get("namespace", "")}
    if meta.get("creationTimestamp"):
        item_meta["creationTimestamp"] = meta["creationTimestamp"]
    if refs:
        item_meta["ownerReferences"] = refs
    return {
        "metadata": item_meta,
        "priority": priority(wl),
        "localQueueName": _queue_of(wl)[1],
        "positionInClusterQueue": in_cluster_queue,
        "positionInLocalQueue": in_local_queue,
    }


def summary(items: list[Obj], version: str = VERSION) -> Obj:
    """The answer at the version the request asked (both versions' types are the same)."""
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"{VISIBILITY_GROUP}/{version}",
        "metadata": {"creationTimestamp": None},
        "items": items,
    }


def cluster_queue_summary(pending: list[Obj], offset: int, limit: int, version: str = VERSION) -> Obj:
    """``pendingWorkloadsInCqREST.Get``: items ``offset`` to ``offset + limit`` of the queue's order; each
    position in its LocalQueue counted over the whole order up to it."""
    counts: dict[tuple[str, str], int] = {}
    items = []
    for index, wl in enumerate(pending[: offset + limit]):
        queue = _queue_of(wl)
        in_local_queue = counts.get(queue, 0)
        counts[queue] = in_local_queue + 1
        if index >= offset:
            items.append(pending_item(wl, in_local_queue, index))
    return summary(items, version)


def local_queue_summary(
    pending: list[Obj], namespace: str, name: str, offset: int, limit: int, version: str = VERSION
) -> Obj:
    """``pendingWorkloadsInLqREST.Get``: the LocalQueue's own workloads, positions in both queues."""
    items: list[Obj] = []
    skipped = 0
    for index, wl in enumerate(pending):
        if len(items) >= limit:
            break
        if _queue_of(wl) != (namespace, name):
            continue
        if skipped < offset:
            skipped += 1
            continue
        items.append(pending_item(wl, len(items) + offset, index))
    return summary(items, version)


def _int_option(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise errors.bad_request(f'invalid value for "{name}": {raw!r} is not an integer') from None
    if value < 0:
        raise errors.bad_request(f'invalid value for "{name}": must be greater than or equal to 0')
    return value


def register_visibility(cluster: ClusterServices) -> None:
    """Serve both ``pendingworkloads`` subresources (GET only) from the store's queues and Workloads."""
    store = cluster.store

    def options(request: web.Request) -> tuple[int, int]:
        if request.method != "GET":
            raise errors.method_not_allowed()
        return _int_option(request, "offset", 0), _int_option(request, "limit", DEFAULT_PENDING_LIMIT)

    async def in_cluster_queue(request: web.Request, target: routing.Target) -> web.StreamResponse:
        offset, limit = options(request)
        name = target.name or ""
        if store.find(CLUSTER_QUEUES, "", name) is None:
            raise errors.not_found(VISIBILITY_GROUP, "clusterqueue", name)
        pending = pending_workloads(name, store.iter(LOCAL_QUEUES), store.iter(WORKLOADS))
        return json_response(cluster_queue_summary(pending, offset, limit, target.version))

    async def in_local_queue(request: web.Request, target: routing.Target) -> web.StreamResponse:
        offset, limit = options(request)
        namespace, name = target.namespace or "", target.name or ""
        lq = store.find(LOCAL_QUEUES, namespace, name)
        if lq is None:
            raise errors.not_found(VISIBILITY_GROUP, "localqueue", name)
        cluster_queue = str((lq.get("spec") or {}).get("clusterQueue", ""))
        pending = pending_workloads(cluster_queue, store.iter(LOCAL_QUEUES), store.iter(WORKLOADS))
        return json_response(local_queue_summary(pending, namespace, name, offset, limit, target.version))

    cluster.register_subresource(VISIBILITY_CLUSTER_QUEUES, PENDING_WORKLOADS, in_cluster_queue)
    cluster.register_subresource(VISIBILITY_LOCAL_QUEUES, PENDING_WORKLOADS, in_local_queue)
