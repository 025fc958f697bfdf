"""Requests and answers as values (pure): what to send for each verb, and what an answer means.

Why values: the sync client (operators, on ``kubernetes``) and the async client (triggers, on
``kubernetes_asyncio``) must send the same requests and read the same answers. Building a :class:`Request`
(method, path, query, headers, body) and judging a :class:`Reply` (status, headers, body -> object or
:class:`~airflow_k8s_ml.errors.ApiError`) here, once, leaves the clients nothing to do but send
(lightkube's ``prepare_request`` / ``handle_response``). Every write asks for strict field validation
(:data:`STRICT`, what ``kubectl`` sends), so an unknown field fails with the API server's own message naming
it instead of being dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.kube.errors import api_error
from airflow_k8s_ml.kube.resources import Resource, resource_for, resource_of

__all__ = [
    "FIELD_MANAGER",
    "JSON",
    "PATCH_TYPES",
    "STRICT",
    "Decode",
    "Reply",
    "Request",
    "create_request",
    "delete_request",
    "get_request",
    "list_request",
    "log_request",
    "patch_request",
    "read_reply",
    "watch_request",
]

JSON = "application/json"
FIELD_MANAGER = "airflow-k8s-ml"
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
#: Refuse unknown and duplicate fields (400 naming them) instead of dropping them: sent with every write.
STRICT = ("fieldValidation", "Strict")
#: How a 2xx body is handed back: parsed JSON, text, bytes, or the open response (watches, log follows).
Decode = Literal["json", "text", "bytes", "stream"]
Query = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Request:
    """One HTTP exchange with the API server, fully described.

    ``timeout``: seconds for the whole answer (None: the client's ``request_timeout``). ``read_timeout``:
    for a stream, the longest silence before the read fails (None: no limit). A stream is opened once and
    never retried by the client: its reader (the watch, the log relay) owns reconnection.
    """

    method: str
    path: str
    query: Query = ()
    body: Any = None
    content_type: str = JSON
    accept: str = JSON
    decode: Decode = "json"
    timeout: float | None = None
    read_timeout: float | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Accept": self.accept, "Content-Type": self.content_type}

    def call_api_arguments(self, timeout: Any) -> dict[str, Any]:
        """Keyword arguments of ``ApiClient.call_api``, identical for ``kubernetes`` and
        ``kubernetes_asyncio``: the response comes back unread, so the client decides how to read it."""
        return {
            "resource_path": self.path,
            "method": self.method,
            "query_params": list(self.query),
            "header_params": self.headers,
            "body": self.body,
            "auth_settings": ["BearerToken"],
            "_preload_content": False,
            "_return_http_data_only": True,
            "_request_timeout": timeout,
        }


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: any status. ``stream`` is the open response of a 2xx stream (body unread)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    data: bytes = b""
    stream: Any = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def read_reply(reply: Reply, decode: Decode = "json") -> Any:
    """The one place an answer becomes a value or an :class:`ApiError` (from the ``Status`` body)."""
    if not reply.ok:
        raise api_error(reply.status, reply.data, reply.headers)
    if decode == "stream":
        return reply.stream
    if decode == "bytes":
        return reply.data
    if decode == "text":
        return reply.text
    return json.loads(reply.data) if reply.data else None


def _object_namespace(obj: Mapping[str, Any], default: str) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or default)


def _write_query(dry_run: bool, *extra: tuple[str, str]) -> Query:
    return (*extra, STRICT, *((("dryRun", "All"),) if dry_run else ()))


def get_request(res: Resource, namespace: str, name: str, subresource: str | None = None) -> Request:
    return Request("GET", res.object_path(namespace, name, subresource))


def list_request(
    res: Resource,
    namespace: str | None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
) -> Request:
    """One LIST page (``limit`` and ``continue_token`` page through one consistent snapshot)."""
    query: list[tuple[str, str]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    if limit:
        query.append(("limit", str(limit)))
    if continue_token:
        query.append(("continue", continue_token))
    return Request("GET", res.collection_path(namespace), tuple(query))


def create_request(obj: Mapping[str, Any], namespace: str, *, dry_run: bool = False) -> Request:
    """POST ``obj`` into its own ``metadata.namespace``, else ``namespace``."""
    path = resource_of(obj).collection_path(_object_namespace(obj, namespace))
    return Request("POST", path, _write_query(dry_run), body=dict(obj))


def patch_request(
    res: Resource,
    namespace: str,
    name: str,
    patch: Any,
    *,
    patch_type: str = "merge",
    subresource: str | None = None,
    dry_run: bool = False,
) -> Request:
    """PATCH as merge | strategic | json | apply (server-side apply as :data:`FIELD_MANAGER`, forced)."""
    if patch_type not in PATCH_TYPES:
        raise ValidationError("patch_type", f"must be one of {', '.join(PATCH_TYPES)}, got {patch_type!r}")
    extra = [("fieldManager", FIELD_MANAGER)] + ([("force", "true")] if patch_type == "apply" else [])
    return Request(
        "PATCH",
        res.object_path(namespace, name, subresource),
        _write_query(dry_run, *extra),
        body=patch,
        content_type=PATCH_TYPES[patch_type],
    )


def delete_request(
    res: Resource, namespace: str, name: str, *, propagation: str = "Foreground", uid: str | None = None
) -> Request:
    """DELETE with ``propagation``; with ``uid``, only that incarnation (409 if the name is another's)."""
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation}
    if uid:
        body["preconditions"] = {"uid": uid}
    return Request("DELETE", res.object_path(namespace, name), body=body)


def log_request(
    namespace: str,
    pod: str,
    *,
    container: str | None = None,
    tail_lines: int | None = None,
    previous: bool = False,
    follow: bool = False,
    timestamps: bool = False,
    since_time: str | None = None,
    limit_bytes: int | None = None,
) -> Request:
    """A container's log: a tail (text) or, with ``follow``, a stream of lines as they are written."""
    query: list[tuple[str, str]] = []
    if limit_bytes is not None:
        query.append(("limitBytes", str(limit_bytes)))
    if follow:
        query.append(("follow", "true"))
    if timestamps:
        query.append(("timestamps", "true"))
    if tail_lines is not None:
        query.append(("tailLines", str(tail_lines)))
    if container:
        query.append(("container", container))
    if previous:
        query.append(("previous", "true"))
    if since_time:
        query.append(("sinceTime", since_time))
    path = resource_for("v1", "Pod").object_path(namespace, pod, "log")
    return Request("GET", path, tuple(query), decode="stream" if follow else "text")


def watch_request(
    res: Resource,
    namespace: str | None,
    *,
    resource_version: str,
    timeout_seconds: int,
    read_timeout: float | None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    bookmarks: bool = False,
) -> Request:
    """A WATCH from ``resource_version``, ended by the server after ``timeout_seconds``."""
    query: list[tuple[str, str]] = [("watch", "true")]
    if field_selector:
        query.append(("fieldSelector", field_selector))
    query.append(("resourceVersion", resource_version))
    if bookmarks:
        query.append(("allowWatchBookmarks", "true"))
    query.append(("timeoutSeconds", str(max(timeout_seconds, 1))))
    if label_selector:
        query.append(("labelSelector", label_selector))
    return Request(
        "GET", res.collection_path(namespace), tuple(query), decode="stream", read_timeout=read_timeout
    )
