"""Every client operation written once, as a plan of requests (pure, sans-I/O).

A plan is a generator: it yields a :class:`~.requests.Request`, receives the decoded answer (or has the
:class:`~airflow_k8s_ml.errors.ApiError` thrown in, after the retries), and returns the operation's result.
"Not found means None", "apply = get, then create or server-side apply", "list in pages", "a Job's pods
under the legacy label too" are decided here; the sync and async clients only run plans
(:class:`~.conversation.Conversation`), so their answers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, TypeVar

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.kube.events import format_warnings, select_warnings
from airflow_k8s_ml.kube.requests import (
    Request,
    create_request,
    delete_request,
    get_request,
    list_request,
    log_request,
    patch_request,
)
from airflow_k8s_ml.kube.resources import (
    JOB_NAME_LABEL,
    LEGACY_JOB_NAME_LABEL,
    Resource,
    kueue_visibility_local_queues,
    pod_label_key,
    resource_for,
    resource_of,
)
from airflow_k8s_ml.status.kueue import KUEUE_GROUP
from airflow_k8s_ml.status.kueue import kueue_version as choose_kueue_version

__all__ = [
    "PAGE_SIZE",
    "Plan",
    "apply",
    "delete",
    "get",
    "kueue_version",
    "list_items",
    "list_snapshot",
    "log_tail",
    "one",
    "pending_workloads",
    "pod_warnings",
    "pods_of",
    "warning_events",
]

T = TypeVar("T")
Obj = dict[str, Any]
Plan = Generator[Request, Any, T]

#: Items per LIST page (client-go's reflector default); an API server that ignores ``limit`` answers whole.
PAGE_SIZE = 500


def one(request: Request) -> Plan[Any]:
    """The plan of a single request: its decoded answer."""
    return (yield request)


def get(res: Resource, namespace: str, name: str) -> Plan[Obj | None]:
    """The object, or None when it does not exist."""
    try:
        result: Obj = yield get_request(res, namespace, name)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise
    return result


def list_snapshot(
    res: Resource,
    namespace: str | None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> Plan[tuple[list[Obj], str]]:
    """(items with ``apiVersion``/``kind`` filled in, the list's resourceVersion), read in pages of
    :data:`PAGE_SIZE` (one consistent snapshot; an expired continue token re-lists whole). List items lack
    ``apiVersion``/``kind``; ``classify`` and the watch read them."""
    selectors = {"label_selector": label_selector, "field_selector": field_selector}
    items: list[Obj] = []
    token, paged = "", True
    while True:
        request = list_request(
            res, namespace, limit=PAGE_SIZE if paged else None, continue_token=token, **selectors
        )
        try:
            body = (yield request) or {}
        except ApiError as exc:
            if not (token and exc.gone):
                raise
            items, token, paged = [], "", False  # the snapshot expired: one whole list instead
            continue
        items.extend(body.get("items") or [])
        meta = body.get("metadata") or {}
        token = str(meta.get("continue") or "") if paged else ""
        if not token:
            break
    for item in items:
        item.setdefault("apiVersion", res.api_version)
        item.setdefault("kind", res.kind)
    return items, str(meta.get("resourceVersion") or "")


def list_items(
    res: Resource,
    namespace: str | None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> Plan[list[Obj]]:
    items, _ = yield from list_snapshot(
        res, namespace, label_selector=label_selector, field_selector=field_selector
    )
    return items


def apply(obj: Mapping[str, Any], namespace: str) -> Plan[tuple[Obj, str]]:
    """Create, or server-side apply to the desired state: ``created`` | ``configured`` | ``unchanged``.

    A rerun never fails on AlreadyExists; "unchanged" is decided by the server (an apply that changes
    nothing keeps the resourceVersion), so defaulted fields never look like drift.
    """
    res = resource_of(obj)
    meta = obj.get("metadata") or {}
    name, namespace = str(meta.get("name")), str(meta.get("namespace") or namespace)
    current = yield from get(res, namespace, name)
    if current is None:
        try:
            created: Obj = yield create_request(obj, namespace)
            return created, "created"
        except ApiError as exc:
            if not exc.conflict:
                raise
            current = (yield from get(res, namespace, name)) or {}
    applied: Obj = yield patch_request(res, namespace, name, dict(obj), patch_type="apply")
    before = (current.get("metadata") or {}).get("resourceVersion")
    after = (applied.get("metadata") or {}).get("resourceVersion")
    return applied, "unchanged" if before == after else "configured"


def delete(
    res: Resource, namespace: str, name: str, *, propagation: str = "Foreground", uid: str | None = None
) -> Plan[bool]:
    """True if this call deleted (or began deleting) the object; False when it is already gone, or when
    ``uid`` is given and the object by that name is another one (a stale reference never deletes a newer
    attempt)."""
    try:
        yield delete_request(res, namespace, name, propagation=propagation, uid=uid)
    except ApiError as exc:
        if exc.not_found or (uid and exc.conflict):
            return False
        raise
    return True


def kueue_version() -> Plan[str]:
    """The Kueue version the cluster serves that we speak (v1beta2 where served, else v1beta1), from its
    ``APIGroup`` document; no Kueue (404) or no right to read it (403): the newest."""
    try:
        group: Obj = yield Request("GET", f"/apis/{KUEUE_GROUP}")
    except ApiError as exc:
        if exc.status in (403, 404):
            return choose_kueue_version(None)
        raise
    return choose_kueue_version(group)


def pending_workloads(local_queue: str, namespace: str, version: str) -> Plan[Obj]:
    """Kueue's ``PendingWorkloadsSummary`` of a LocalQueue (its on-demand visibility API at ``version``), the
    only place Kueue reports queue positions. Errors are raised (404: no visibility API or no such queue,
    403: no RBAC): whether a missing position matters is the caller's call."""
    summary: Obj = yield get_request(
        kueue_visibility_local_queues(version), namespace, local_queue, "pendingworkloads"
    )
    return summary


def pods_of(kind: str, name: str, namespace: str) -> Plan[list[Obj]]:
    """The workload's pods by its name label (Jobs fall back to the legacy ``job-name`` label)."""
    key = pod_label_key(kind)
    if key is None:
        return []
    pods = resource_for("v1", "Pod")
    found = yield from list_items(pods, namespace, label_selector=f"{key}={name}")
    if not found and key == JOB_NAME_LABEL:
        found = yield from list_items(pods, namespace, label_selector=f"{LEGACY_JOB_NAME_LABEL}={name}")
    return found


def log_tail(
    pod: str,
    namespace: str,
    container: str | None = None,
    lines: int = 50,
    *,
    previous: bool = False,
    limit_bytes: int | None = None,
) -> Plan[str]:
    """The last ``lines`` of a container's log; "" when there is none (not started, pod gone).

    ``previous`` reads the container's previous instance (``kubectl logs --previous``): in a crash loop
    that is where the error is; "" when there was none."""
    request = log_request(
        namespace, pod, container=container, tail_lines=lines, previous=previous, limit_bytes=limit_bytes
    )
    try:
        text: str = yield request
    except ApiError as exc:
        if exc.status in (400, 404):
            return ""
        raise
    return text


def warning_events(
    obj: Mapping[str, Any], namespace: str, pods: Sequence[Mapping[str, Any]] | None = None, limit: int = 20
) -> Plan[list[str]]:
    """Warning events of the object and of its pods (listed when not given), oldest first, one line each."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or namespace)
    if pods is None:
        pods = list((yield from pods_of(str(obj.get("kind")), str(meta.get("name")), namespace)))
    events = yield from list_items(resource_for("v1", "Event"), namespace, field_selector="type=Warning")
    uids = {str(meta.get("uid"))} | {str((p.get("metadata") or {}).get("uid")) for p in pods}
    return format_warnings(select_warnings(events, uids), limit=limit)


def pod_warnings(namespace: str, pods: Sequence[Mapping[str, Any]]) -> Plan[list[Mapping[str, Any]]]:
    """The Warning events of ``pods`` as the API holds them, oldest first: what a wait reads to tell why a
    pod stays in ``ContainerCreating`` (``FailedMount``), which its status does not say."""
    events = yield from list_items(resource_for("v1", "Event"), namespace, field_selector="type=Warning")
    return select_warnings(events, {str((p.get("metadata") or {}).get("uid")) for p in pods})
