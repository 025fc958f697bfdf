"""``KubeClient``: the blocking facade operators use, on the cncf ``KubernetesHook``.

Why on the hook: an Airflow connection (``kube_config_path``, ``kube_config``, ``in_cluster``,
``cluster_context``, ``disable_verify_ssl``) then configures us exactly as it configures the stock
operators. Why raw REST paths instead of typed APIs or the dynamic client: every kind we drive (Job,
PyTorchJob, Deployment, CronJob, ...) goes through one code path returning plain dicts, which is what
:func:`airflow_k8s_ml.status.classify` reads; no discovery round trips, no model conversion.
Transient failures (429 with Retry-After, 5xx, lost connections) are retried per :class:`RetryPolicy`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_k8s_ml.kube.errors import ApiError, api_error
from airflow_k8s_ml.kube.events import format_warnings, select_warnings
from airflow_k8s_ml.kube.resources import (
    JOB_NAME_LABEL,
    LEGACY_JOB_NAME_LABEL,
    Resource,
    call_api_arguments,
    pod_label_key,
    resource_for,
    resource_of,
)
from airflow_k8s_ml.kube.retry import RetryPolicy

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["FIELD_MANAGER", "KubeClient"]

T = TypeVar("T")
FIELD_MANAGER = "airflow-k8s-ml"
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
Query = list[tuple[str, str]]
Items = list[dict[str, Any]]  # aliases: inside the classes, ``list`` names the method
Lines = list[str]


class KubeClient:
    """Create, read, patch and delete any kind; logs, Warning events and pods of a workload.

    ``namespace`` defaults to the connection's ``namespace`` extra, then ``default``.
    """

    def __init__(
        self,
        conn_id: str = "kubernetes_default",
        namespace: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        request_timeout: float = 60.0,
    ) -> None:
        self.conn_id = conn_id
        self._namespace = namespace
        self.retry = retry or RetryPolicy()
        self.request_timeout = request_timeout

    # -- plumbing ---------------------------------------------------------------------------------------
    @cached_property
    def hook(self) -> Any:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

        return KubernetesHook(conn_id=self.conn_id)

    @cached_property
    def api_client(self) -> ApiClient:
        """One client (one connection pool) for the life of this object."""
        return self.hook.api_client  # type: ignore[no-any-return]

    @cached_property
    def namespace(self) -> str:
        return self._namespace or self.hook.get_namespace() or "default"

    def close(self) -> None:
        if "api_client" in self.__dict__:
            self.api_client.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """One HTTP exchange; returns the urllib3 response or raises :class:`ApiError`."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self.api_client.call_api(
                **call_api_arguments(
                    path,
                    method,
                    query=query,
                    body=body,
                    content_type=content_type,
                    timeout=timeout or self.request_timeout,
                )
            )
        except ApiException as exc:
            if not exc.status:
                raise ApiError(0, "ConnectionError", str(exc.reason)) from exc
            raise api_error(exc.status, exc.body, exc.headers) from exc
        except Exception as exc:  # urllib3 transport errors: no HTTP answer
            if type(exc).__module__.startswith(("urllib3", "ssl", "socket")) or isinstance(exc, OSError):
                raise ApiError(0, type(exc).__name__, str(exc)) from exc
            raise

    def _retrying(self, call: Callable[[], T]) -> T:
        attempt = 0
        while True:
            try:
                return call()
            except ApiError as exc:
                delay = self.retry.delay(exc, attempt)
                if delay is None:
                    raise
            time.sleep(delay)
            attempt += 1

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """JSON in, JSON out, with retries; the generic escape hatch under every helper."""

        def call() -> Any:
            response = self._send(method, path, query=query, body=body, content_type=content_type)
            data = response.data
            return json.loads(data) if data else None

        return self._retrying(call)

    def get_raw(self, path: str, query: Query | None = None) -> bytes:
        """GET a non-JSON endpoint (``/metrics``, ``/healthz``), with retries."""

        def call() -> bytes:
            data: bytes = self._send("GET", path, query=query).data
            return data

        return self._retrying(call)

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # -- objects ----------------------------------------------------------------------------------------
    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """POST the object (its ``metadata.namespace``, else the client's namespace)."""
        res = resource_of(obj)
        namespace = self._ns((obj.get("metadata") or {}).get("namespace"))
        result: dict[str, Any] = self.request("POST", res.collection_path(namespace), body=dict(obj))
        return result

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        res = resource_for(api_version, kind)
        try:
            result: dict[str, Any] = self.request("GET", res.object_path(self._ns(namespace), name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return result

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> Items:
        """Items with ``apiVersion``/``kind`` filled in (list items lack them), so ``classify`` reads them."""
        res = resource_for(api_version, kind)
        return self._list(res, self._ns(namespace), label_selector=label_selector)

    def _list(
        self,
        res: Resource,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        fields: str | None = None,
    ) -> Items:
        query: Query = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if fields:
            query.append(("fieldSelector", fields))
        body = self.request("GET", res.collection_path(namespace), query=query) or {}
        items = body.get("items") or []
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        return list(items)

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PATCH with ``patch_type`` merge | strategic | json | apply (server-side apply, forced)."""
        res = resource_for(api_version, kind)
        query: Query = [("fieldManager", FIELD_MANAGER)]
        if patch_type == "apply":
            query.append(("force", "true"))
        result: dict[str, Any] = self.request(
            "PATCH",
            res.object_path(self._ns(namespace), name, subresource),
            query=query,
            body=patch,
            content_type=PATCH_TYPES[patch_type],
        )
        return result

    def apply(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """Create, or server-side apply to the desired state: ``created`` | ``configured`` | ``unchanged``.

        A rerun never fails on AlreadyExists; "unchanged" is decided by the server (an apply that changes
        nothing keeps the resourceVersion), so defaulted fields never look like drift.
        """
        meta = obj.get("metadata") or {}
        api_version, kind, name = str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("name"))
        namespace = self._ns(meta.get("namespace"))
        current = self.get(api_version, kind, name, namespace)
        if current is None:
            try:
                return self.create(obj), "created"
            except ApiError as exc:
                if not exc.conflict:
                    raise
                current = self.get(api_version, kind, name, namespace) or {}
        applied = self.patch(api_version, kind, name, namespace, dict(obj), patch_type="apply")
        before = (current.get("metadata") or {}).get("resourceVersion")
        after = (applied.get("metadata") or {}).get("resourceVersion")
        return applied, "unchanged" if before == after else "configured"

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete with ``propagation``; True if this call deleted (or started deleting) the object.

        False when it is already gone, or when ``uid`` is given and the object by that name is another one
        (a newer attempt must never be deleted by a stale reference).
        """
        res = resource_for(api_version, kind)
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", res.object_path(self._ns(namespace), name), body=body)
        except ApiError as exc:
            if exc.not_found or (uid and exc.conflict):
                return False
            raise
        return True

    def wait_gone(
        self, api_version: str, kind: str, name: str, namespace: str | None = None, timeout: float = 60.0
    ) -> bool:
        """Block until the object no longer exists (Foreground deletion finished); False on timeout.

        Watches the one object (field selector) instead of polling: the DELETED event ends the wait.
        """
        res = resource_for(api_version, kind)
        namespace = self._ns(namespace)
        deadline = time.monotonic() + timeout
        while True:
            current = self.get(api_version, kind, name, namespace)
            remaining = deadline - time.monotonic()
            if current is None:
                return True
            if remaining <= 0:
                return False
            rv = str((current.get("metadata") or {}).get("resourceVersion") or "")
            if self._watch_until_deleted(res, namespace, name, rv, remaining):
                return True

    def _watch_until_deleted(self, res: Resource, namespace: str, name: str, rv: str, timeout: float) -> bool:
        query: Query = [
            ("watch", "true"),
            ("fieldSelector", f"metadata.name={name}"),
            ("resourceVersion", rv),
            ("timeoutSeconds", str(max(int(timeout + 0.999), 1))),
        ]
        try:
            response = self._send("GET", res.collection_path(namespace), query=query, timeout=timeout + 5)
        except ApiError as exc:
            if exc.status in (0, 429) or exc.status >= 500:
                time.sleep(min(0.5, max(timeout, 0)))
                return False
            raise
        try:
            for line in _lines(response):
                event = json.loads(line)
                if event.get("type") == "DELETED":
                    return True
                if event.get("type") == "ERROR":
                    return False
        except Exception:  # stream cut: the caller re-reads and watches again
            return False
        finally:
            response.release_conn()
        return False

    # -- pods, logs, events -----------------------------------------------------------------------------
    def pods_of(self, kind: str, name: str, namespace: str | None = None) -> Items:
        """The workload's pods by its name label (Jobs fall back to the legacy ``job-name`` label)."""
        key = pod_label_key(kind)
        if key is None:
            return []
        pods_res = resource_for("v1", "Pod")
        pods = self._list(pods_res, self._ns(namespace), label_selector=f"{key}={name}")
        if not pods and key == JOB_NAME_LABEL:
            pods = self._list(pods_res, self._ns(namespace), label_selector=f"{LEGACY_JOB_NAME_LABEL}={name}")
        return pods

    def pod_log_tail(
        self,
        pod_name: str,
        namespace: str | None = None,
        container: str | None = None,
        lines: int = 50,
        *,
        previous: bool = False,
    ) -> str:
        """The last ``lines`` lines of the pod's log; "" when there is none yet (container not started).

        ``previous`` reads the container's previous instance (``kubectl logs --previous``): in a crash loop
        that is where the error is; "" when there was none."""
        query: Query = [("tailLines", str(lines))]
        if container:
            query.append(("container", container))
        if previous:
            query.append(("previous", "true"))
        path = resource_for("v1", "Pod").object_path(self._ns(namespace), pod_name, "log")

        def call() -> str:
            data: bytes = self._send("GET", path, query=query).data
            return data.decode("utf-8", "replace")

        try:
            return self._retrying(call)
        except ApiError as exc:
            if exc.status in (400, 404):
                return ""
            raise

    def warning_events(self, obj: Mapping[str, Any], limit: int = 20) -> Lines:
        """Warning events of the object and of its pods, oldest first, one line each."""
        meta = obj.get("metadata") or {}
        namespace = self._ns(meta.get("namespace"))
        pods = self.pods_of(str(obj.get("kind")), str(meta.get("name")), namespace)
        events = self._list(resource_for("v1", "Event"), namespace, fields="type=Warning")
        uids = {str(meta.get("uid"))} | {str((p.get("metadata") or {}).get("uid")) for p in pods}
        return format_warnings(select_warnings(events, uids), limit=limit)


def _lines(response: Any) -> Any:
    """Lines of a streamed urllib3 response (a watch), as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=64 * 1024, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer
