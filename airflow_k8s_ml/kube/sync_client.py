"""``KubeClient``: the blocking client operators use, on the cncf ``KubernetesHook``.

Why on the hook: an Airflow connection (``kube_config_path``, ``kube_config``, ``in_cluster``,
``cluster_context``, ``disable_verify_ssl``) then configures us exactly as it configures the stock
operators. Why raw REST paths instead of typed APIs or the dynamic client: every kind we drive (Job,
PyTorchJob, Deployment, CronJob, ...) goes through one code path returning plain dicts, which is what
:func:`airflow_k8s_ml.status.classify` reads; no discovery round trips, no model conversion.

A thin shell: what to send and what an answer means are in :mod:`.operations` and :mod:`.requests`, retries
in :mod:`.conversation`; this class only sends and sleeps. Its methods have the same names, arguments and
results as :class:`~.async_client.AsyncKube`'s (checked by a test).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.kube import operations as ops
from airflow_k8s_ml.kube.conversation import Conversation
from airflow_k8s_ml.kube.requests import (
    FIELD_MANAGER,
    JSON,
    Reply,
    Request,
    create_request,
    patch_request,
    watch_request,
)
from airflow_k8s_ml.kube.resources import resource_for
from airflow_k8s_ml.kube.retry import RetryPolicy
from airflow_k8s_ml.status.kueue import KUEUE_GROUP

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["FIELD_MANAGER", "KubeClient", "stream_lines"]

T = TypeVar("T")
Query = list[tuple[str, str]]
Items = list[dict[str, Any]]  # aliases: inside the classes, ``list`` names the method
Lines = list[str]
Events = list[Mapping[str, Any]]
#: Seconds to establish a stream's connection (its reads are bounded by ``Request.read_timeout``).
CONNECT_TIMEOUT = 30.0


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
        self._kueue_version: str | None = None

    # -- plumbing ---------------------------------------------------------------------------------------
    @cached_property
    def hook(self) -> Any:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

        return KubernetesHook(conn_id=self.conn_id)

    @cached_property
    def api_client(self) -> ApiClient:
        """One client (one connection pool) for the life of this object (until credentials are reloaded)."""
        return self.hook.api_client  # type: ignore[no-any-return]

    @cached_property
    def namespace(self) -> str:
        return self._namespace or self.hook.get_namespace() or "default"

    def close(self) -> None:
        if "api_client" in self.__dict__:
            self.api_client.close()

    def _refresh_credentials(self) -> None:
        """A 401: build a new hook and client from the connection (an exec plugin mints a new token)."""
        self.close()
        self.__dict__.pop("api_client", None)
        self.__dict__.pop("hook", None)

    def send(self, request: Request) -> Reply:
        """One exchange, any status; raises :class:`ApiError` (status 0) only when nothing answered."""
        from kubernetes.client.exceptions import ApiException

        stream = request.decode == "stream"
        timeout = (
            (CONNECT_TIMEOUT, request.read_timeout) if stream else request.timeout or self.request_timeout
        )
        try:
            response = self.api_client.call_api(**request.call_api_arguments(timeout))
            if stream:
                return Reply(response.status, dict(response.headers or {}), stream=response)
            try:
                return Reply(response.status, dict(response.headers or {}), response.data or b"")
            finally:
                response.release_conn()
        except ApiException as exc:
            if not exc.status:
                raise ApiError(0, "ConnectionError", str(exc.reason)) from exc
            body = exc.body if isinstance(exc.body, bytes) else str(exc.body or "").encode()
            return Reply(int(exc.status), dict(exc.headers or {}), body)
        except Exception as exc:  # urllib3 transport errors: no HTTP answer
            if _no_answer(exc):
                raise ApiError(0, type(exc).__name__, str(exc)) from exc
            raise

    def run(self, plan: ops.Plan[T]) -> T:
        """Run a plan of :mod:`.operations`: send each request, retry and sleep as the conversation says."""
        talk: Conversation[T] = Conversation(plan, self.retry)
        step = talk.start()
        while step is not None:
            if step.refresh:
                self._refresh_credentials()
            if step.wait:
                time.sleep(step.wait)
            try:
                reply = self.send(step.request)
            except ApiError as exc:
                step = talk.failed(exc)
                continue
            step = talk.answered(reply)
        return talk.result

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # -- the API (the same in AsyncKube) ----------------------------------------------------------------
    def stream(self, request: Request) -> Any:
        """Open a streaming GET (watch, log follow); the caller reads it (:func:`stream_lines`) and releases
        it (``release_conn``). Not retried: the reader owns reconnection."""
        return self.run(ops.one(request))

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> Any:
        """JSON in, JSON out, with retries; the generic escape hatch under every helper."""
        return self.run(ops.one(Request(method, path, tuple(query or ()), body, content_type)))

    def get_raw(self, path: str, query: Query | None = None) -> bytes:
        """GET a non-JSON endpoint (``/metrics``, ``/healthz``, a log with options), with retries."""
        result: bytes = self.run(ops.one(Request("GET", path, tuple(query or ()), decode="bytes")))
        return result

    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """POST the object (its ``metadata.namespace``, else the client's namespace)."""
        return self.run(ops.one(create_request(obj, self.namespace, dry_run=dry_run)))

    def get(
        self, api_version: str | None, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        return self.run(ops.get(resource_for(api_version, kind), self._ns(namespace), name))

    def list(
        self,
        api_version: str | None,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        *,
        field_selector: str | None = None,
    ) -> Items:
        """Items with ``apiVersion``/``kind`` filled in (list items lack them), so ``classify`` reads them."""
        res, selectors = resource_for(api_version, kind), {"field_selector": field_selector}
        return self.run(ops.list_items(res, self._ns(namespace), label_selector=label_selector, **selectors))

    def patch(
        self,
        api_version: str | None,
        kind: str,
        name: str,
        namespace: str | None,
        patch: Any,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH with ``patch_type`` merge | strategic | json | apply (server-side apply, forced)."""
        res, namespace = resource_for(api_version, kind), self._ns(namespace)
        request = patch_request(
            res, namespace, name, patch, patch_type=patch_type, subresource=subresource, dry_run=dry_run
        )
        return self.run(ops.one(request))

    def apply(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        """Create, or server-side apply: ``created`` | ``configured`` | ``unchanged``."""
        return self.run(ops.apply(obj, self.namespace))

    def delete(
        self,
        api_version: str | None,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete with ``propagation``; True if this call deleted (or started deleting) the object."""
        res = resource_for(api_version, kind)
        return self.run(ops.delete(res, self._ns(namespace), name, propagation=propagation, uid=uid))

    def kueue_version(self) -> str:
        """The Kueue API version to speak here (v1beta2 where served, else v1beta1): asked once per client
        (its one connection pool), then cached."""
        if self._kueue_version is None:
            self._kueue_version = self.run(ops.kueue_version())
        return self._kueue_version

    def kueue_api_version(self) -> str:
        """``kueue.x-k8s.io/<kueue_version()>``."""
        return f"{KUEUE_GROUP}/{self.kueue_version()}"

    def pending_workloads(self, local_queue: str, namespace: str | None = None) -> dict[str, Any]:
        """Kueue's ``PendingWorkloadsSummary`` of a LocalQueue; raises ``ApiError`` (404 without the API)."""
        return self.run(ops.pending_workloads(local_queue, self._ns(namespace), self.kueue_version()))

    def pods_of(self, kind: str, name: str, namespace: str | None = None) -> Items:
        return self.run(ops.pods_of(kind, name, self._ns(namespace)))

    def log_tail(
        self,
        pod: str,
        namespace: str | None = None,
        container: str | None = None,
        lines: int = 50,
        *,
        previous: bool = False,
        limit_bytes: int | None = None,
    ) -> str:
        return self.run(
            ops.log_tail(
                pod, self._ns(namespace), container, lines, previous=previous, limit_bytes=limit_bytes
            )
        )

    def warning_events(
        self, obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] | None = None, limit: int = 20
    ) -> Lines:
        return self.run(ops.warning_events(obj, self.namespace, pods, limit))

    def pod_warnings(self, pods: Sequence[Mapping[str, Any]], namespace: str | None = None) -> Events:
        return self.run(ops.pod_warnings(self._ns(namespace), pods))

    # -- blocking only ----------------------------------------------------------------------------------
    def wait_gone(
        self,
        api_version: str | None,
        kind: str,
        name: str,
        namespace: str | None = None,
        timeout: float = 60.0,
    ) -> bool:
        """Block until the object no longer exists (Foreground deletion finished); False on timeout.

        Watches the one object (field selector) instead of polling: the DELETED event ends the wait.
        """
        namespace = self._ns(namespace)
        deadline = time.monotonic() + timeout
        while True:
            current = self.get(api_version, kind, name, namespace)
            remaining = deadline - time.monotonic()
            if current is None:
                return True
            if remaining <= 0:
                return False
            request = watch_request(
                resource_for(api_version, kind),
                namespace,
                resource_version=str((current.get("metadata") or {}).get("resourceVersion") or ""),
                timeout_seconds=int(remaining + 0.999),
                read_timeout=remaining + 5,
                field_selector=f"metadata.name={name}",
            )
            if self._watch_until_deleted(request, remaining):
                return True

    def _watch_until_deleted(self, request: Request, timeout: float) -> bool:
        try:
            response = self.stream(request)
        except ApiError as exc:
            if exc.status in (0, 429) or exc.status >= 500:
                time.sleep(min(0.5, max(timeout, 0)))
                return False
            raise
        try:
            for event in stream_lines(response):
                if event.get("type") == "DELETED":
                    return True
                if event.get("type") == "ERROR":
                    return False
        except Exception:  # stream cut: the caller re-reads and watches again
            return False
        finally:
            response.release_conn()
        return False


def _no_answer(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("urllib3", "ssl", "socket", "http")) or isinstance(exc, OSError)


def stream_lines(response: Any) -> Iterator[dict[str, Any]]:
    """The JSON documents of a streamed urllib3 response (a watch), one per line, as they arrive."""
    import json

    buffer = b""
    for chunk in response.stream(amt=64 * 1024, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)
