"""The HTTP face of the local cluster: Kubernetes REST semantics over aiohttp.

Requests flow through three middlewares (metrics, authentication, error rendering) into one dispatcher
that resolves the path (:mod:`routing`) and calls a handler per verb. Handlers only translate between HTTP
and the :class:`~.store.Store`; defaulting and validation per kind happen in admission functions that the
controllers register, so this module knows no kind-specific rule.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from airflow_k8s_ml.k8s.selectors import SelectorError, parse_label_selector

from . import discovery, errors, routing, tables
from .decoding import (
    MAX_DEPTH,
    TOO_DEEP,
    check_fields,
    decode_body,
    nesting_depth,
    validation_mode,
    warning_headers,
)
from .faults import Faults
from .metrics import Metrics
from .patch import apply_patch
from .resources import ANSWER, ResourceType, Unserved, deprecation_warning
from .responses import JSON, json_response, status_response
from .selectors import parse_field_selector, supported_fields
from .services import SubresourceHandler
from .settings import ClusterSettings
from .store import Change, Obj, Store, Watch
from .watch_encoding import EventCache, encode_event, write_chunked

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# What a request for one resource (collection or object) is handed to, chosen by method (see ``_verbs``).
TargetHandler = Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]
# What a path under a prefix (``/admin/``, ``/openapi/v3/``) is handed to, with the rest of the path.
PrefixHandler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]
# The API server's limit on request bodies (apiserver config: 3 MiB, "to account for JSON being larger than
# the protobuf stored in etcd"); larger bodies get 413 RequestEntityTooLarge.
MAX_REQUEST_BYTES = 3 * 1024 * 1024

log = logging.getLogger(__name__)


def _truthy(value: str | None) -> bool:
    # The Python clients send booleans as "True"/"False"; kubectl as "true"/"1".
    return (value or "").lower() in ("true", "1")


def status_success(rt: ResourceType, obj: Obj) -> dict[str, Any]:
    details: dict[str, Any] = {
        "name": obj["metadata"]["name"],
        "kind": rt.plural,
        "uid": obj["metadata"]["uid"],
    }
    if rt.group:
        details["group"] = rt.group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


class ServedCluster(Protocol):
    """What the server uses of the cluster it serves: the store, the admission chain (``admit``,
    ``to_storage``, ``present``), the subresources the controllers registered, the admin endpoint, and
    what the middlewares need (token, metrics, faults, settings)."""

    store: Store
    token: str
    settings: ClusterSettings
    metrics: Metrics
    faults: Faults
    subresources: dict[tuple[tuple[str, str], str], SubresourceHandler]
    #: What answers every request for a virtual kind whose reads a controller serves (the metrics APIs).
    readers: dict[tuple[str, str], SubresourceHandler]
    #: (group, version) pairs the settings turn off: 404 and absent from discovery.
    unserved: Unserved

    def admit(self, rt: ResourceType, obj: Obj, old: Obj | None) -> Obj: ...

    def to_storage(self, rt: ResourceType, obj: Obj) -> Obj: ...

    def present(self, rt: ResourceType, obj: Obj) -> Obj: ...

    async def admin(self, request: web.Request, action: str) -> web.StreamResponse: ...


class ApiServer:
    """Routes and handlers. Kind-specific behaviour lives in the cluster's admission and subresource maps.

    Every route is in tables built here, once: the fixed paths, the path prefixes, and the verbs of a
    resource by (method, whether the path names one object)."""

    def __init__(self, cluster: ServedCluster) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.token = cluster.token
        self._seen_transports: weakref.WeakSet[Any] = weakref.WeakSet()
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._events = EventCache()
        self._fixed: dict[str, Handler] = self._fixed_routes()
        self._prefixed: tuple[tuple[str, PrefixHandler], ...] = (
            ("/openapi/v3/", self._openapi_doc),
            ("/admin/", self.cluster.admin),
        )
        self._verbs: dict[tuple[str, bool], TargetHandler] = {
            ("GET", False): self._list_or_watch,
            ("POST", False): self.create,
            ("DELETE", False): self.delete_collection,
            ("GET", True): self._get,
            ("PUT", True): self.replace,
            ("PATCH", True): self.patch,
            ("DELETE", True): self.delete,
        }

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._metrics_mw, self._auth_mw, self._errors_mw], client_max_size=MAX_REQUEST_BYTES
        )
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        app.on_response_prepare.append(self._deprecation_warning)
        return app

    async def _deprecation_warning(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every answer at a deprecated version carries its warning, as the apiserver adds a deprecated CRD
        version's ``deprecationWarning`` to each request's warnings (kubectl prints them)."""
        target = routing.parse(request.path)
        if not isinstance(target, routing.Target) or target.rt is None:
            return
        warning = deprecation_warning(target.rt, self.cluster.unserved)
        if warning:
            response.headers.add("Warning", f'299 - "{warning}"')

    # -- middlewares -------------------------------------------------------------------------------
    @web.middleware
    async def _metrics_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.transport is not None and request.transport not in self._seen_transports:
            self._seen_transports.add(request.transport)
            self.cluster.metrics.connections += 1
        verb, resource = self._classify(request)
        dry_run = _dry_run(request)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            self.cluster.metrics.count_request(verb, resource, exc.status, dry_run=dry_run)
            raise
        self.cluster.metrics.count_request(verb, resource, response.status, dry_run=dry_run)
        return response

    @web.middleware
    async def _auth_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(presented.strip(), self.token):
            return status_response(errors.unauthorized())
        return await handler(request)

    @web.middleware
    async def _errors_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            verb, resource = self._classify(request)
            if not request.path.startswith("/admin") and request.path != "/metrics":
                self.cluster.faults.check(verb, resource)
            return await handler(request)
        except web.HTTPRequestEntityTooLarge:
            err = errors.request_entity_too_large(MAX_REQUEST_BYTES)
            return status_response(err, {"Connection": "close"})
        except (errors.LocalClusterError, SelectorError, RecursionError) as exc:
            return status_response(errors.as_status(exc))

    @staticmethod
    def _classify(request: web.Request) -> tuple[str, str]:
        """(verb, resource) the way apiserver metrics label requests: LIST and WATCH apart from GET."""
        target = routing.parse(request.path)
        if not isinstance(target, routing.Target):
            return request.method, ""
        resource = target.plural
        verb = request.method
        if verb == "GET" and target.name is None:
            verb = "WATCH" if _truthy(request.query.get("watch")) else "LIST"
        if target.subresource and target.subresource not in ("status",):
            resource = f"{target.plural}/{target.subresource}"
        return verb, resource

    # -- dispatch ----------------------------------------------------------------------------------
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") if request.path != "/" else "/"
        fixed = self._fixed.get(path)
        if fixed is not None:
            return await fixed(request)
        for prefix, handler in self._prefixed:
            if path.startswith(prefix):
                return await handler(request, path[len(prefix) :])
        target = routing.parse(request.path)
        if isinstance(target, routing.GroupVersion):
            doc = discovery.resource_list(target.group, target.version, self.cluster.unserved)
            if doc is None:
                raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
            return json_response(doc)
        if target is None and path.startswith("/apis/") and path.count("/") == 2:
            group_doc = discovery.api_group(path[len("/apis/") :], self.cluster.unserved)
            if group_doc is not None:
                return json_response(group_doc)
        if target is None or target.rt is None or (target.group, target.version) in self.cluster.unserved:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        return await self._resource(request, target)

    def _fixed_routes(self) -> dict[str, Handler]:
        async def text(body: str) -> web.Response:
            return web.Response(text=body, content_type="text/plain")

        return {
            "/version": lambda r: _ok(discovery.version_info()),
            "/api": lambda r: _ok(discovery.core_versions(f"{r.host}")),
            "/apis": lambda r: _ok(discovery.group_list(self.cluster.unserved)),
            "/openapi/v3": lambda r: _ok(discovery.openapi_index(self.cluster.unserved)),
            "/healthz": lambda r: text("ok"),
            "/readyz": lambda r: text("ok"),
            "/livez": lambda r: text("ok"),
            "/metrics": lambda r: text(self.cluster.metrics.render()),
        }

    async def _openapi_doc(self, request: web.Request, gv_path: str) -> web.Response:
        parts = gv_path.split("/")
        if parts[0] == "api" and len(parts) == 2:
            doc = discovery.openapi_document("", parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = discovery.openapi_document(parts[1], parts[2], self.cluster.unserved)
        else:
            doc = None
        if doc is None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        return json_response(doc)

    async def _resource(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        assert target.rt is not None
        if target.rt.namespaced and target.namespace is None and target.name is not None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        reader = self.cluster.readers.get(target.rt.storage_key) if target.rt.virtual else None
        if reader is not None:
            return await reader(request, target)
        if target.subresource and target.subresource != "status":
            handler = self.cluster.subresources.get((target.rt.storage_key, target.subresource))
            if handler is None:
                raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
            return await handler(request, target)
        if target.rt.answered:  # created to be answered (a review): POST on the collection only
            answer = self.cluster.subresources.get((target.rt.storage_key, ANSWER))
            if answer is None or request.method != "POST" or target.name is not None:
                raise errors.method_not_allowed()
            return await answer(request, target)
        if target.rt.virtual:  # nothing stored: only its registered subresources exist
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        verb = self._verbs.get((request.method, target.name is not None))
        if verb is None:
            raise errors.method_not_allowed()
        return await verb(request, target)

    async def _list_or_watch(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        if _truthy(request.query.get("watch")):
            return await self.watch(request, target)
        return self.list(request, target)

    async def _get(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        return self.get(request, target)

    # -- verbs -------------------------------------------------------------------------------------
    def get(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        obj = self.cluster.present(rt, self.store.get(rt, target.namespace or "", target.name or ""))
        if tables.wants_table(request.headers.get("Accept", "")):
            return json_response(tables.to_table([obj], rt.kind, obj["metadata"]["resourceVersion"]))
        return json_response(obj)

    def list(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        matches = self._matcher(request, rt)
        # Live objects, not copies: nothing awaits before they are encoded, so none can change meanwhile,
        # and copying 200 pods per list took most of a list's time under load.
        rv = self.store.resource_version
        items = [self.cluster.present(rt, o) for o in self.store.iter(rt, target.namespace) if matches(o)]
        if tables.wants_table(request.headers.get("Accept", "")):
            return json_response(tables.to_table(items, rt.kind, str(rv)))
        return json_response(
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            }
        )

    async def create(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        obj, warnings = await self._read_object(request, rt)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            if meta.get("namespace") and target.namespace and meta["namespace"] != target.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = target.namespace or meta.get("namespace") or "default"
        obj.pop("status", None)  # PrepareForCreate: status is the controllers' to write
        obj = self.cluster.admit(rt, obj, None)
        created = self.store.create(rt, obj, dry_run=_dry_run(request))
        return json_response(self.cluster.present(rt, created), 201, warning_headers(warnings))

    async def replace(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        obj, warnings = await self._read_object(request, rt)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != target.name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({target.name})"
            )
        meta["name"] = target.name
        if rt.namespaced:
            meta["namespace"] = target.namespace
        old = self.store.get(rt, target.namespace or "", target.name or "")
        if target.subresource != "status":
            obj = self.cluster.admit(rt, obj, old)
        updated = self.store.update(
            rt, self.cluster.to_storage(rt, obj), subresource=target.subresource, dry_run=_dry_run(request)
        )
        return json_response(self.cluster.present(rt, updated), 200, warning_headers(warnings))

    async def patch(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        content_type = request.headers.get("Content-Type", JSON)
        mode = _validation(request)
        raw = await request.read()
        namespace, name = target.namespace or "", target.name or ""
        current = self.store.find(rt, namespace, name)
        if current is None:
            if content_type.startswith("application/apply-patch"):
                return await self._apply_create(request, target, raw)
            raise errors.not_found(rt.group, rt.plural, name)
        presented = self.cluster.present(rt, current)
        patched = apply_patch(presented, raw, content_type, rt.kind)
        if not isinstance(patched, dict):
            raise errors.bad_request("patch did not produce an object")
        if nesting_depth(patched) > MAX_DEPTH:
            raise errors.bad_request(f"error decoding patch: {TOO_DEEP}")
        patched, warnings = check_fields(patched, rt.api_version, rt.kind, mode, [])
        meta = patched.setdefault("metadata", {})
        meta["name"], meta["uid"] = name, current["metadata"]["uid"]
        if rt.namespaced:
            meta["namespace"] = namespace
        if (
            meta.get("resourceVersion") != current["metadata"]["resourceVersion"]
            and meta.get("resourceVersion") is not None
            and _patch_sets_rv(raw, content_type)
        ):
            raise errors.conflict(rt.group, rt.plural, name)
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if target.subresource != "status":
            patched = self.cluster.admit(rt, patched, presented)
        updated = self.store.update(
            rt,
            self.cluster.to_storage(rt, patched),
            subresource=target.subresource,
            dry_run=_dry_run(request),
        )
        return json_response(self.cluster.present(rt, updated), 200, warning_headers(warnings))

    async def _apply_create(self, request: web.Request, target: routing.Target, raw: bytes) -> web.Response:
        rt = _rt(target)
        obj = decode_body(raw, "application/apply-patch+yaml").body
        obj.setdefault("metadata", {})["name"] = target.name
        if rt.namespaced:
            obj["metadata"]["namespace"] = target.namespace
        obj, warnings = check_fields(obj, rt.api_version, rt.kind, _validation(request), [])
        obj = self.cluster.admit(rt, obj, None)
        created = self.store.create(rt, obj, dry_run=_dry_run(request))
        return json_response(self.cluster.present(rt, created), 201, warning_headers(warnings))

    async def delete(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        options = await self._delete_options(request)
        gone, obj = self.store.delete(
            rt,
            target.namespace or "",
            target.name or "",
            propagation=options.get("propagationPolicy"),
            grace_period=options.get("gracePeriodSeconds"),
            precondition_uid=(options.get("preconditions") or {}).get("uid"),
            precondition_rv=(options.get("preconditions") or {}).get("resourceVersion"),
            dry_run=_dry_run(request),
        )
        if self.store.delete_rules[rt.storage_key].answers_with_object:
            return json_response(self.cluster.present(rt, obj))
        if gone:
            return json_response(status_success(rt, obj))
        return json_response(self.cluster.present(rt, obj), 202)

    async def delete_collection(self, request: web.Request, target: routing.Target) -> web.Response:
        rt = _rt(target)
        options = await self._delete_options(request)
        matches = self._matcher(request, rt)
        items, rv = self.store.list(rt, target.namespace)
        deleted = []
        for obj in items:
            if matches(obj):
                try:
                    _, last = self.store.delete(
                        rt,
                        obj["metadata"].get("namespace", ""),
                        obj["metadata"]["name"],
                        propagation=options.get("propagationPolicy"),
                        grace_period=options.get("gracePeriodSeconds"),
                    )
                    deleted.append(self.cluster.present(rt, last))
                except errors.StatusError as exc:
                    if exc.code != 404:
                        raise
        return json_response(
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": deleted,
            }
        )

    # -- watch -------------------------------------------------------------------------------------
    async def watch(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        rt = _rt(target)
        matches = self._matcher(request, rt)
        asked = _watch_request(request)
        response = web.StreamResponse(headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        await response.prepare(request)

        async def send(event_type: str, obj: Obj) -> None:
            if asked.as_table and event_type in ("ADDED", "MODIFIED", "DELETED"):
                table = tables.to_table([obj], rt.kind, obj["metadata"]["resourceVersion"])
                await write_chunked(response, encode_event(event_type, table))
                return
            # One encoding per event, shared by every watcher (see watch_encoding).
            await write_chunked(response, self._events.event(event_type, obj))

        faults = self.cluster.faults
        try:
            if asked.since is not None and faults.expires_resume():
                raise errors.expired(asked.resource_version, self.store.resource_version)
            w, backlog = self.store.watch(rt, target.namespace, asked.since)
        except errors.StatusError as exc:
            await send("ERROR", exc.status())
            await response.write_eof()
            return response
        # The initial state is a snapshot of references taken now, synchronously with the registration.
        initial = [o for o in self.store.iter(rt, target.namespace)] if asked.since is None else []
        self.cluster.metrics.longrunning[rt.plural] += 1
        loop = asyncio.get_running_loop()
        w.on_overflow = self._abort_if_stuck(request, rt)
        deadline = loop.time() + asked.timeout if asked.timeout else None
        cut = loop.time() + faults.close_watches_after if faults.close_watches_after else None
        if cut is not None:
            deadline = min(deadline, cut) if deadline else cut
        try:
            for obj in initial:
                if w.overflowed:
                    break
                if matches(obj):
                    await send("ADDED", self.cluster.present(rt, obj))
            initial.clear()
            for change in backlog:
                if w.overflowed:
                    break
                await self._send_change(send, rt, change, matches)
            backlog.clear()
            await self._follow(w, send, rt, matches, deadline, asked.bookmarks)
            if cut is not None and deadline == cut and loop.time() >= cut and not w.overflowed:
                faults.note_closed_watch()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.stop_watch(w)
            self.cluster.metrics.longrunning[rt.plural] -= 1
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    async def _follow(
        self,
        w: Watch,
        send: Callable[[str, Obj], Awaitable[None]],
        rt: ResourceType,
        matches: Callable[[Obj], bool],
        deadline: float | None,
        bookmarks: bool,
    ) -> None:
        """Live changes after the initial state and the backlog, with a bookmark every
        ``bookmark_interval`` when asked, until the deadline, an overflow or the watch is closed."""
        loop = asyncio.get_running_loop()
        bookmark_every = self.cluster.settings.bookmark_interval if bookmarks else None
        next_bookmark = loop.time() + bookmark_every if bookmark_every else None
        while not w.overflowed:
            wait_for: builtins.list[float] = [t for t in (deadline, next_bookmark) if t is not None]
            timeout_left = max(min(wait_for) - loop.time(), 0) if wait_for else None
            try:
                live = await w.next(timeout_left)
            except TimeoutError:
                now = loop.time()
                if deadline is not None and now >= deadline:
                    break
                if next_bookmark is not None and now >= next_bookmark and bookmark_every:
                    await send(
                        "BOOKMARK",
                        {
                            "kind": rt.kind,
                            "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(self.store.resource_version)},
                        },
                    )
                    next_bookmark = now + bookmark_every
                continue
            if live is None:
                break
            await self._send_change(send, rt, live, matches)

    def _abort_if_stuck(self, request: web.Request, rt: ResourceType) -> Callable[[], None]:
        """What happens when a watcher falls too far behind: it is closed, as the API server's cacher
        closes a watcher whose channel is full; its handler ends after the event it is writing, and if
        the client does not even take that within the grace period, the connection is dropped."""

        def overflowed() -> None:
            log.warning("Forcing %s watcher close due to unresponsiveness: %s", rt.plural, request.remote)
            transport = request.transport

            def abort() -> None:
                if transport is not None and not transport.is_closing():
                    transport.abort()

            if transport is not None:
                asyncio.get_running_loop().call_later(self.cluster.settings.watch_stall_grace, abort)

        return overflowed

    async def _send_change(
        self,
        send: Callable[[str, Obj], Awaitable[None]],
        rt: ResourceType,
        change: Change,
        matches: Callable[[Obj], bool],
    ) -> None:
        """Selector transitions: an object that stops matching is DELETED, one that starts is ADDED."""
        now_matches = matches(change.obj)
        was_matching = change.old is not None and matches(change.old)
        if change.type == "ADDED":
            event = "ADDED" if now_matches else None
        elif change.type == "DELETED":
            event = "DELETED" if (was_matching or now_matches) else None
        elif now_matches and was_matching:
            event = "MODIFIED"
        elif now_matches:
            event = "ADDED"
        elif was_matching:
            event = "DELETED"
        else:
            event = None
        if event is not None:
            await send(event, self.cluster.present(rt, change.obj))

    # -- helpers -----------------------------------------------------------------------------------
    def _matcher(self, request: web.Request, rt: ResourceType) -> Callable[[Obj], bool]:
        labels = parse_label_selector(request.query.get("labelSelector", ""))
        fields = parse_field_selector(request.query.get("fieldSelector", ""), supported_fields(rt.plural))

        def matches(obj: Obj) -> bool:
            return labels.matches(obj.get("metadata", {}).get("labels") or {}) and fields.matches(obj)

        return matches

    async def _read_object(self, request: web.Request, rt: ResourceType) -> tuple[Obj, builtins.list[str]]:
        mode = _validation(request)  # the options are checked before the body, as upstream
        decoded = decode_body(await request.read(), request.headers.get("Content-Type", JSON))
        obj = decoded.body
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request must be a JSON object")
        api_version = obj.get("apiVersion", rt.api_version)
        kind = obj.get("kind", rt.kind)
        if kind != rt.kind or api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
                if api_version != rt.api_version
                else f'Object kind "{kind}" does not match the resource "{rt.plural}" ({rt.kind})'
            )
        return check_fields(obj, rt.api_version, rt.kind, mode, decoded.duplicates)

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if request.can_read_body:
            raw = await request.read()
            if raw.strip():
                body = decode_body(raw, request.headers.get("Content-Type", JSON)).body or {}
                options.update({k: v for k, v in body.items() if v is not None})
        query = request.query
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        if options.pop("orphanDependents", None) is True:
            options.setdefault("propagationPolicy", "Orphan")
        if "orphanDependents" in query and _truthy(query["orphanDependents"]):
            options.setdefault("propagationPolicy", "Orphan")
        policy = options.get("propagationPolicy")
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise errors.bad_request(f'DeleteOptions.propagationPolicy: Unsupported value: "{policy}"')
        return options


@dataclass(frozen=True)
class _WatchRequest:
    """What a watch asks for: where to start (``since`` None: the current state first), how long, whether
    with bookmarks, and whether as Table rows."""

    resource_version: str
    since: int | None
    timeout: float | None
    bookmarks: bool
    as_table: bool


def _watch_request(request: web.Request) -> _WatchRequest:
    requested = request.query.get("resourceVersion") or ""
    timeout = float(request.query.get("timeoutSeconds") or 0) or None
    bookmarks = _truthy(request.query.get("allowWatchBookmarks"))
    as_table = tables.wants_table(request.headers.get("Accept", ""))
    since = int(requested) if requested not in ("", "0") else None
    if requested and requested != "0" and not requested.isdigit():
        raise errors.bad_request(f'invalid resource version "{requested}"')
    return _WatchRequest(requested, since, timeout, bookmarks, as_table)


def _rt(target: routing.Target) -> ResourceType:
    assert target.rt is not None
    return target.rt


async def _ok(body: Any) -> web.Response:
    return json_response(body)


def _validation(request: web.Request) -> str:
    return validation_mode(request.query.get("fieldValidation"), request.method)


def _dry_run(request: web.Request) -> bool:
    return request.query.get("dryRun") == "All"


def _patch_sets_rv(raw: bytes, content_type: str) -> bool:
    return b'"resourceVersion"' in raw and "json-patch" not in content_type


__all__ = ["ApiServer", "ServedCluster"]
