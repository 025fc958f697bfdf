"""The ``pods/log`` subresource: what ``kubectl logs [-f] [--previous] [--timestamps] [--tail]`` reads.

Choosing the container and the instance follows the apiserver (pod strategy LogLocation) and the kubelet
(validateContainerLogStatus), including their 400 messages; the text comes from the CRI-format files
written by :mod:`.logfile`. With ``follow`` the response streams until that instance exits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from .. import errors, routing
from ..store import Store
from .logfile import LogSink, Record, RecordReader, container_log_path, parse_rfc3339
from .volumes import pod_dir

Obj = dict[str, Any]
Write = Callable[[bytes], Awaitable[None]]


class LogRegistry:
    """Sinks of live container instances, by containerID, so followers can wait for new lines."""

    def __init__(self) -> None:
        self._sinks: dict[str, LogSink] = {}
        self._by_pod: dict[str, list[str]] = {}

    def register(self, pod_uid: str, container_id: str, sink: LogSink) -> None:
        self._sinks[container_id] = sink
        self._by_pod.setdefault(pod_uid, []).append(container_id)

    def get(self, container_id: str) -> LogSink | None:
        return self._sinks.get(container_id)

    def forget_pod(self, pod_uid: str) -> None:
        for container_id in self._by_pod.pop(pod_uid, []):
            self._sinks.pop(container_id, None)


@dataclass(frozen=True)
class LogOptions:
    container: str
    follow: bool
    previous: bool
    since: float | None
    tail: int | None
    limit: int | None
    timestamps: bool


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _int(query: Any, name: str) -> int | None:
    raw = query.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def parse_options(query: Any, pod_name: str) -> LogOptions:
    """Query parameters -> options, with PodLogOptions validation (422) as upstream."""
    since_seconds, tail, limit = (
        _int(query, "sinceSeconds"),
        _int(query, "tailLines"),
        _int(query, "limitBytes"),
    )
    since_time = query.get("sinceTime")
    causes = []
    if since_seconds is not None and since_time:
        causes.append(
            ("", "FieldValueForbidden", "at most one of `sinceTime` or `sinceSeconds` may be specified")
        )
    for name, value, floor in (
        ("sinceSeconds", since_seconds, 1),
        ("limitBytes", limit, 1),
        ("tailLines", tail, 0),
    ):
        if value is not None and value < floor:
            detail = "must be greater than 0" if floor else "must be greater than or equal to 0"
            causes.append((name, "FieldValueInvalid", f"Invalid value: {value}: {detail}"))
    if causes:
        raise errors.invalid("PodLogOptions", "", "pods", pod_name, causes)
    since = None
    if since_seconds is not None:
        import time

        since = time.time() - since_seconds
    elif since_time:
        try:
            since = parse_rfc3339(since_time)
        except ValueError:
            raise errors.bad_request(f'parsing time "{since_time}" as RFC3339: cannot parse') from None
    return LogOptions(
        query.get("container", ""),
        _truthy(query.get("follow")),
        _truthy(query.get("previous")),
        since,
        tail,
        limit,
        _truthy(query.get("timestamps")),
    )


def choose_container(pod: Obj, requested: str) -> str:
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    containers = [c.get("name", "") for c in spec.get("containers") or []]
    init = [c.get("name", "") for c in spec.get("initContainers") or []]
    if not requested:
        if len(containers) == 1:
            return containers[0]
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        message = (
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
        )
        if init:
            message += f" or one of the init containers: [{' '.join(init)}]"
        raise errors.bad_request(message)
    if requested not in containers + init:
        raise errors.bad_request(f"container {requested} is not valid for pod {name}")
    return requested


def choose_instance(pod: Obj, container: str, previous: bool) -> str:
    """The containerID whose log to read (validateContainerLogStatus)."""
    status = pod.get("status") or {}
    statuses = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    found = next((s for s in statuses if s.get("name") == container), None)
    pod_name = pod["metadata"]["name"]
    if found is None:
        raise errors.bad_request(
            f'container "{container}" in pod "{pod_name}" is waiting to start: ContainerCreating'
        )
    state, last = found.get("state") or {}, (found.get("lastState") or {}).get("terminated")
    if previous:
        if not last or not last.get("containerID"):
            raise errors.bad_request(
                f'previous terminated container "{container}" in pod "{pod_name}" not found'
            )
        return str(last["containerID"])
    if state.get("running"):
        return str(found.get("containerID", ""))
    if state.get("terminated") or last:
        terminated = state.get("terminated") or last or {}
        cid = terminated.get("containerID") or (last or {}).get("containerID")
        if not cid:
            raise errors.bad_request(f'container "{container}" in pod "{pod_name}" is terminated')
        return str(cid)
    reason = (state.get("waiting") or {}).get("reason", "")
    detail = {
        "ErrImagePull": "image can't be pulled",
        "ImagePullBackOff": "trying and failing to pull image",
    }.get(reason, reason)
    raise errors.bad_request(f'container "{container}" in pod "{pod_name}" is waiting to start: {detail}')


class _Output:
    """Applies sinceTime and limitBytes while writing."""

    def __init__(self, options: LogOptions, write: Write) -> None:
        self._options = options
        self._write = write
        self._left = options.limit

    @property
    def full(self) -> bool:
        return self._left is not None and self._left <= 0

    async def emit(self, records: list[Record]) -> None:
        chunk = b"".join(
            r.render(self._options.timestamps)
            for r in records
            if self._options.since is None or r.seconds >= self._options.since
        )
        if self._left is not None:
            chunk, self._left = chunk[: self._left], self._left - len(chunk)
        if chunk:
            await self._write(chunk)


async def copy_log(path: Path, sink: LogSink | None, options: LogOptions, write: Write) -> None:
    reader = RecordReader(path)
    try:
        records = reader.read()
        if options.tail is not None:
            records = records[-options.tail :] if options.tail else []
        out = _Output(options, write)
        await out.emit(records)
        while options.follow and not out.full:
            closed = sink is None or sink.closed
            await out.emit(reader.read())
            if closed:
                return
            assert sink is not None
            await sink.changed(1.0)
    finally:
        reader.close()


def log_handler(
    store: Store, registry: LogRegistry, state_dir: Path
) -> Callable[[web.Request, routing.Target], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request, target: routing.Target) -> web.StreamResponse:
        if request.method != "GET":
            raise errors.method_not_allowed()
        assert target.rt is not None
        pod = store.get(target.rt, target.namespace or "", target.name or "")
        options = parse_options(request.query, pod["metadata"]["name"])
        container = choose_container(pod, options.container)
        if not (pod.get("spec") or {}).get("nodeName"):
            return web.Response(body=b"", content_type="text/plain")
        container_id = choose_instance(pod, container, options.previous)
        path = container_log_path(pod_dir(state_dir, pod), container, container_id)
        sink = registry.get(container_id)
        if not options.follow:
            chunks: list[bytes] = []

            async def collect(chunk: bytes) -> None:
                chunks.append(chunk)

            await copy_log(path, sink, options, collect)
            return web.Response(body=b"".join(chunks), content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"})
        await response.prepare(request)
        try:
            await copy_log(path, sink, options, response.write)
            await response.write_eof()
        except ConnectionResetError:
            pass
        return response

    return handle
