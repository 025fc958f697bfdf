"""Cluster calls the serving operators need beyond :class:`KubeClient`'s CRUD: the API server's service proxy,
the ReplicaSets of a Deployment (for ``kubectl rollout undo``), ``kubectl create job --from=cronjob/...``,
and a bounded watch of one object (the rollout a deploy follows in the worker before it defers).

Why the service proxy for smoke tests: Airflow workers usually cannot reach pod or ClusterIP addresses, but
they can always reach the API server; ``/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/<path>`` works
the same on a real cluster and on the local one. The decisions (which ReplicaSet and which JSON patch undo a
rollout, which Job body) are pure functions elsewhere (``operators/_rollback.py``, ``manifests/batch.py``);
this module only fetches and sends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.k8s.selectors import format_label_selector
from airflow_k8s_ml.kube.apply_plan import desired_digest, is_unchanged, stamped
from airflow_k8s_ml.kube.requests import Request, watch_request
from airflow_k8s_ml.kube.resources import resource_of
from airflow_k8s_ml.kube.sync_client import KubeClient, stream_lines

__all__ = [
    "PendingApply",
    "ProxyResponse",
    "apply_object",
    "apply_objects",
    "create_job_from_cronjob",
    "plan_apply",
    "proxy_request",
    "prune",
    "replica_sets_of",
    "service_proxy_path",
    "watch_versions",
    "write_pending",
]


@dataclass(frozen=True)
class ProxyResponse:
    """What the backend answered through the proxy (any status: a 503 is an answer, not an exception)."""

    status: int
    body: str


def service_proxy_path(
    namespace: str, service: str, port: str | int, path: str = "/", *, resource: str = "services"
) -> str:
    """``/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/<path>`` (port by name or number), or with
    ``resource="pods"`` the pod proxy (port by number): one pod, e.g. a canary's, instead of the Service's
    choice."""
    tail = path if path.startswith("/") else f"/{path}"
    return (
        f"/api/v1/namespaces/{quote(namespace, safe='')}/{resource}/"
        f"{quote(service, safe='')}:{quote(str(port), safe='')}/proxy{tail}"
    )


def proxy_request(
    client: KubeClient,
    namespace: str,
    service: str,
    port: str | int,
    path: str,
    *,
    body: Any = None,
    timeout: float = 10.0,
    resource: str = "services",
) -> ProxyResponse:
    """GET ``path`` (or POST ``body`` as JSON) on the Service through the API server.

    Non-2xx answers come back as a :class:`ProxyResponse`; only a missing HTTP answer raises
    (``ApiError`` with status 0), so callers can retry "no answer" and judge "wrong answer".
    """
    request = Request(
        "GET" if body is None else "POST",
        service_proxy_path(namespace, service, port, path, resource=resource),
        body=body,
        accept="application/json, */*",
        decode="bytes",
        timeout=timeout,
    )
    reply = client.send(request)
    return ProxyResponse(reply.status, reply.text)


#: Metadata the server changes on any write (status included), so it says nothing about *our* fields.
_VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation")


def _desired_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without status and write-bookkeeping: what an apply can change."""
    view = {k: v for k, v in obj.items() if k != "status"}
    view["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    return view


@dataclass(frozen=True)
class PendingApply:
    """One object's write, decided from its live state: ``create`` | ``apply`` | None (unchanged)."""

    obj: dict[str, Any]
    create_body: dict[str, Any]
    live: dict[str, Any] | None
    write: Literal["create", "apply"] | None


def plan_apply(
    client: KubeClient, obj: Mapping[str, Any], *, create_body: Mapping[str, Any] | None = None
) -> PendingApply:
    """Read the live object and decide its write (one GET): both bodies carry the digest of ``obj``."""
    meta = obj.get("metadata") or {}
    current = client.get(
        str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("name")), meta.get("namespace")
    )
    digest = desired_digest(obj)
    desired, first = stamped(obj, digest), stamped(create_body or obj, digest)
    if current is None:
        return PendingApply(desired, first, None, "create")
    return PendingApply(desired, first, current, None if is_unchanged(obj, current) else "apply")


def write_pending(
    client: KubeClient, pending: PendingApply, *, dry_run: bool = False
) -> tuple[dict[str, Any], str]:
    """Send the decided write (``dry_run``: validated by the server, nothing stored); the outcome is
    ``created`` | ``configured`` | ``unchanged``."""
    obj, current = pending.obj, pending.live
    if pending.write is None:
        return current or {}, "unchanged"
    meta = obj.get("metadata") or {}
    api_version, kind, name = str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("name"))
    namespace = meta.get("namespace")
    if pending.write == "create":
        try:
            return client.create(pending.create_body, dry_run=dry_run), "created"
        except ApiError as exc:
            if not exc.conflict:
                raise
            current = client.get(api_version, kind, name, namespace) or {}
    applied = client.patch(api_version, kind, name, namespace, obj, patch_type="apply", dry_run=dry_run)
    return applied, "unchanged" if _desired_view(current or {}) == _desired_view(applied) else "configured"


def apply_object(
    client: KubeClient, obj: Mapping[str, Any], *, create_body: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], str]:
    """Create, or server-side apply, and say ``created`` | ``configured`` | ``unchanged``.

    ``unchanged`` sends no write at all: the live object already is the desired state
    (:func:`~airflow_k8s_ml.kube.apply_plan.is_unchanged`), so the call is one GET. ``create_body`` is
    what to POST when the object does not exist yet, if that differs from the apply (a Deployment whose
    HPA owns ``spec.replicas`` is created with the HPA's minimum but applied without it); both carry the
    digest of ``obj``, the state every later run compares with.

    Why not :meth:`KubeClient.apply` alone: it calls an apply "unchanged" when the resourceVersion did not
    move, but a controller writing *status* between its read and its patch (an HPA every sync, a Deployment
    scaling) moves it too, so a no-op re-apply is reported "configured". After a real apply the decision
    here compares the object without status and bookkeeping before and after.
    """
    return write_pending(client, plan_apply(client, obj, create_body=create_body))


def apply_objects(
    client: KubeClient, objects: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
) -> list[tuple[dict[str, Any], str]]:
    """:func:`apply_object` for several objects ``(obj, create_body)``, all or nothing as far as validation
    goes: when more than one needs a write, every write is first sent as a server-side dry run
    (``dryRun=All``: admission, defaulting and strict field validation, nothing stored), so a typo in the
    third object fails before the first one is written. A single write is its own check."""
    pending = [plan_apply(client, obj, create_body=body) for obj, body in objects]
    if sum(p.write is not None for p in pending) > 1:
        for item in pending:
            if item.write is not None:
                write_pending(client, item, dry_run=True)
    return [write_pending(client, item) for item in pending]


def replica_sets_of(client: KubeClient, deployment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ReplicaSets controlled by ``deployment``: its selector, narrowed to the controller reference
    (``metav1.IsControlledBy``), so an orphaned or foreign ReplicaSet with the same labels never counts."""
    meta = deployment.get("metadata") or {}
    match_labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    uid = meta.get("uid")
    items = client.list(
        "apps/v1", "ReplicaSet", meta.get("namespace"), format_label_selector(match_labels) or None
    )
    return [
        rs
        for rs in items
        if uid and any(r.get("controller") and r.get("uid") == uid for r in _owner_refs(rs))
    ]


def _owner_refs(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("metadata") or {}).get("ownerReferences") or [])


def create_job_from_cronjob(
    client: KubeClient,
    cronjob_name: str,
    namespace: str,
    job_name: str,
    build_job: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> tuple[dict[str, Any], str]:
    """``kubectl create job <job_name> --from=cronjob/<cronjob_name>``, adopting on retry.

    ``build_job`` turns the live CronJob into the Job to create (the caller renders it: building objects is
    ``manifests/``' job, sending them this module's). Returns ``(job, "created" | "adopted")``. An existing
    Job of that name is adopted only if the same CronJob (by uid) controls it; anything else is a conflict
    we must not paper over.
    """
    cronjob = client.get("batch/v1", "CronJob", cronjob_name, namespace)
    if cronjob is None:
        raise ApiError(404, "NotFound", f'cronjobs.batch "{cronjob_name}" not found')
    cronjob.setdefault("kind", "CronJob")
    job = build_job(cronjob)
    try:
        return client.create(job), "created"
    except ApiError as exc:
        if not exc.conflict:
            raise
    existing = client.get("batch/v1", "Job", job_name, namespace)
    owner_uid = (cronjob.get("metadata") or {}).get("uid")
    if existing is None or not any(
        r.get("controller") and r.get("uid") == owner_uid for r in _owner_refs(existing)
    ):
        raise ApiError(
            409, "AlreadyExists", f'jobs.batch "{job_name}" exists and is not a Job of {cronjob_name}'
        )
    return existing, "adopted"


def prune(
    client: KubeClient, api_version: str, kind: str, name: str, namespace: str, owned: Mapping[str, str]
) -> bool:
    """Delete an object the desired state no longer contains (an HPA after autoscaling was turned off).

    Only when it carries all ``owned`` labels: an object of the same name someone else made stays.
    """
    current = client.get(api_version, kind, name, namespace)
    if current is None:
        return False
    labels = (current.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in owned.items()):
        return False
    uid = (current.get("metadata") or {}).get("uid")
    return client.delete(api_version, kind, name, namespace, propagation="Background", uid=uid)


def watch_versions(client: KubeClient, obj: Mapping[str, Any], seconds: float) -> Iterator[dict[str, Any]]:
    """Each new version of ``obj`` (a watch on its name from its resourceVersion) for up to ``seconds``.

    For a short wait in the worker, where a deferral would cost more than the wait: the iteration simply
    ends when time is up, the watch is cut or the resourceVersion is too old (410), and the caller defers
    to the trigger, which handles every such case. Errors other than "no answer" propagate.
    """
    meta = obj.get("metadata") or {}
    deadline = time.monotonic() + seconds
    request = watch_request(
        resource_of(obj),
        meta.get("namespace") or client.namespace,
        resource_version=str(meta.get("resourceVersion") or ""),
        timeout_seconds=int(seconds + 0.999),
        read_timeout=seconds + 5,
        field_selector=f"metadata.name={meta.get('name')}",
    )
    try:
        response = client.stream(request)
    except ApiError:  # no answer or an error status: the trigger will wait instead
        return
    try:
        for event in stream_lines(response):
            if event.get("type") not in ("ADDED", "MODIFIED"):
                return  # DELETED, ERROR (410 Gone), BOOKMARK: the trigger takes over
            yield dict(event.get("object") or {})
            if time.monotonic() >= deadline:
                return
    except Exception as exc:  # the stream was cut: defer
        if not type(exc).__module__.startswith(("urllib3", "ssl", "socket", "http")):
            raise
    finally:
        response.release_conn()


def describe_body(text: str, limit: int = 300) -> str:
    """A short, single-line rendering of a response body for messages."""
    try:
        text = json.dumps(json.loads(text))
    except ValueError:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
