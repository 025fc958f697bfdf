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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from airflow_k8s_ml.kube.apply_plan import desired_digest, is_unchanged, stamped
from airflow_k8s_ml.kube.errors import ApiError
from airflow_k8s_ml.kube.resources import call_api_arguments, resource_of
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.manifests.batch import job_from_cronjob

__all__ = [
    "ProxyResponse",
    "apply_object",
    "create_job_from_cronjob",
    "proxy_request",
    "prune",
    "replica_sets_of",
    "service_proxy_path",
    "watch_versions",
]


@dataclass(frozen=True)
class ProxyResponse:
    """What the backend answered through the proxy (any status: a 503 is an answer, not an exception)."""

    status: int
    body: str


def service_proxy_path(namespace: str, service: str, port: str | int, path: str = "/") -> str:
    """``/api/v1/namespaces/<ns>/services/<name>:<port>/proxy/<path>`` (port by name or number)."""
    tail = path if path.startswith("/") else f"/{path}"
    return (
        f"/api/v1/namespaces/{quote(namespace, safe='')}/services/"
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
) -> ProxyResponse:
    """GET ``path`` (or POST ``body`` as JSON) on the Service through the API server.

    Non-2xx answers come back as a :class:`ProxyResponse`; only a missing HTTP answer raises
    (``ApiError`` with status 0), so callers can retry "no answer" and judge "wrong answer".
    """
    from kubernetes.client.exceptions import ApiException

    method = "GET" if body is None else "POST"
    try:
        response = client.api_client.call_api(
            service_proxy_path(namespace, service, port, path),
            method,
            header_params={"Accept": "application/json, */*", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
    except ApiException as exc:
        if not exc.status:
            raise ApiError(0, "ConnectionError", str(exc.reason)) from exc
        raw = exc.body or b""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        return ProxyResponse(int(exc.status), text)
    except Exception as exc:  # urllib3/ssl/socket errors: no HTTP answer
        if type(exc).__module__.startswith(("urllib3", "ssl", "socket")) or isinstance(exc, OSError):
            raise ApiError(0, type(exc).__name__, str(exc)) from exc
        raise
    data = response.data or b""
    return ProxyResponse(int(response.status), data.decode("utf-8", "replace"))


#: Metadata the server changes on any write (status included), so it says nothing about *our* fields.
_VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation")


def _desired_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object without status and write-bookkeeping: what an apply can change."""
    view = {k: v for k, v in obj.items() if k != "status"}
    view["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    return view


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
    meta = obj.get("metadata") or {}
    api_version, kind, name = str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("name"))
    namespace = meta.get("namespace")
    digest = desired_digest(obj)
    current = client.get(api_version, kind, name, namespace)
    if current is None:
        try:
            return client.create(stamped(create_body or obj, digest)), "created"
        except ApiError as exc:
            if not exc.conflict:
                raise
            current = client.get(api_version, kind, name, namespace) or {}
    if is_unchanged(obj, current):
        return current, "unchanged"
    applied = client.patch(api_version, kind, name, namespace, stamped(obj, digest), patch_type="apply")
    return applied, "unchanged" if _desired_view(current) == _desired_view(applied) else "configured"


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def replica_sets_of(client: KubeClient, deployment: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ReplicaSets controlled by ``deployment``: its selector, narrowed to the controller reference
    (``metav1.IsControlledBy``), so an orphaned or foreign ReplicaSet with the same labels never counts."""
    meta = deployment.get("metadata") or {}
    match_labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    uid = meta.get("uid")
    items = client.list("apps/v1", "ReplicaSet", meta.get("namespace"), _selector(match_labels) or None)
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
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], str]:
    """``kubectl create job <job_name> --from=cronjob/<cronjob_name>``, adopting on retry.

    Returns ``(job, "created" | "adopted")``. An existing Job of that name is adopted only if the same CronJob
    (by uid) controls it; anything else is a conflict we must not paper over.
    """
    cronjob = client.get("batch/v1", "CronJob", cronjob_name, namespace)
    if cronjob is None:
        raise ApiError(404, "NotFound", f'cronjobs.batch "{cronjob_name}" not found')
    cronjob.setdefault("kind", "CronJob")
    job = job_from_cronjob(cronjob, job_name, labels=labels, annotations=annotations)
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
    res = resource_of(obj)
    deadline = time.monotonic() + seconds
    remaining = seconds
    query = [
        ("watch", "true"),
        ("fieldSelector", f"metadata.name={meta.get('name')}"),
        ("resourceVersion", str(meta.get("resourceVersion") or "")),
        ("timeoutSeconds", str(max(1, int(remaining + 0.999)))),
    ]
    path = res.collection_path(meta.get("namespace") or client.namespace)
    arguments = call_api_arguments(
        path, "GET", query=query, body=None, content_type="application/json", timeout=remaining + 5
    )
    try:
        response = client.api_client.call_api(**arguments)
    except Exception as exc:  # no answer or an error status: the trigger will wait instead
        if type(exc).__module__.startswith(("urllib3", "ssl", "socket", "kubernetes")):
            return
        raise
    try:
        buffer = b""
        for chunk in response.stream(amt=64 * 1024, decode_content=True):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                event = json.loads(line)
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
