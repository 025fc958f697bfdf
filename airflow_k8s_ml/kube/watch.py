"""One shared list+watch per (connection, resource, namespace), fanned out to every waiting trigger.

Why shared: a triggerer waiting on a thousand Jobs should hold one watch on ``jobs`` (and one on their
pods), not a thousand polls. The layers follow kopf's ``watching.py``:

1. :meth:`SharedWatch._run` reconnects forever: 429 waits ``Retry-After``, 5xx and lost connections walk
   the backoff sequence (data, :class:`WatchSettings`), a refused watch (405/403 on WATCH) falls back to
   polling with LIST, a refused LIST (401/403/404) fails the subscribers;
2. list, then watch from the list's resourceVersion; resume from the last resourceVersion seen (events and
   bookmarks) after a clean end or a cut; an ``ERROR`` event with 410 Expired means re-list;
3. one stream with a server-side ``timeoutSeconds`` (jittered like client-go) and a client-side inactivity
   timeout slightly longer, so a silently dead connection is noticed.

Subscribers ask for an *index value*: the object name (workload watch) or the value of a label (pod watch,
``batch.kubernetes.io/job-name=<job>``), and are woken through an ``asyncio.Event`` they own whenever one of
their objects changes; they then read the latest state (never a backlog). Deleted objects are kept as
tombstones per subscription, so a terminal state followed at once by a deletion (TTL 0) is not lost.
Reference counted: the watch task stops when the last subscriber leaves (after ``linger``).

Reachability: the watch records since when the API server has not answered (no connection, or 502/503/504
from a proxy in front of it) and the last such error; subscribers decide how long they put up with it (the
trigger's ``api_unreachable_timeout``), the watch itself keeps retrying. A burst of events (a re-list, a
resumed watch) is applied in slices of :data:`YIELD_EVERY` seconds, so the loop is never held long.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from airflow_k8s_ml.kube.errors import ApiError, api_error
from airflow_k8s_ml.kube.operations import list_snapshot
from airflow_k8s_ml.kube.requests import watch_request
from airflow_k8s_ml.kube.resources import Resource

__all__ = [
    "SharedWatch",
    "Subscription",
    "WatchKey",
    "WatchRegistry",
    "WatchSettings",
    "get_registry",
    "reset_registry",
]

log = logging.getLogger(__name__)
Obj = dict[str, Any]

#: Answers to a LIST that no retry will change: the subscribers get the error.
FATAL_LIST_STATUSES = frozenset({400, 401, 403, 404, 405, 422})
#: Answers to a WATCH that mean "you may list but not watch": poll instead.
REFUSED_WATCH_STATUSES = frozenset({403, 405})
#: No answer from the API server itself: no connection (0), or a proxy/load balancer saying it has none.
UNREACHABLE_STATUSES = frozenset({0, 502, 503, 504})
#: Apply buffered events for at most this long (seconds) before giving the event loop a turn.
YIELD_EVERY = 0.005


@dataclass(frozen=True)
class WatchKey:
    """What one shared watch covers. ``index_label`` None: subscribers pick objects by name; else by the
    value of that label, and the watch selects objects carrying it (an existence selector)."""

    conn_id: str
    resource: Resource
    namespace: str
    index_label: str | None = None

    @property
    def label_selector(self) -> str:
        return self.index_label or ""

    def index_of(self, obj: Mapping[str, Any]) -> str | None:
        meta = obj.get("metadata") or {}
        if self.index_label is None:
            return meta.get("name")
        value = (meta.get("labels") or {}).get(self.index_label)
        return str(value) if value is not None else None


@dataclass(frozen=True)
class WatchSettings:
    """Timings as data, so tests shrink them instead of sleeping.

    ``backoffs``: waits after consecutive failures (the last one repeats). ``timeout_seconds``: the
    server ends each watch after this (times 1 + U[0, ``timeout_jitter``)), and we resume from the last
    resourceVersion; ``inactivity_grace`` is added for the client-side read timeout. ``poll_interval``:
    the LIST period when watching is refused. ``linger``: keep an unused watch open this long.
    """

    backoffs: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0)
    timeout_seconds: int = 300
    timeout_jitter: float = 1.0
    inactivity_grace: float = 30.0
    poll_interval: float = 30.0
    linger: float = 0.0
    max_retry_after: float = 60.0
    min_healthy_stream: float = 1.0

    def backoff(self, failures: int) -> float:
        return self.backoffs[min(max(failures, 0), len(self.backoffs) - 1)] if self.backoffs else 0.0


class Subscription:
    """One waiter's view of a shared watch: the latest objects with its index value."""

    def __init__(
        self, watch: SharedWatch, value: str, wake: asyncio.Event, poll_interval: float | None
    ) -> None:
        self._watch = watch
        self.value = value
        self.wake = wake
        self.poll_interval = poll_interval
        self.tombstones: dict[str, Obj] = {}

    def objects(self) -> dict[str, Obj]:
        """name -> latest object (shared, do not mutate)."""
        return dict(self._watch.index.get(self.value, {}))

    def get(self, name: str) -> Obj | None:
        return self._watch.index.get(self.value, {}).get(name)

    @property
    def synced(self) -> bool:
        """True once the watch has listed: an absent object is then really absent (or not yet seen)."""
        return self._watch.synced

    @property
    def error(self) -> ApiError | None:
        return self._watch.error

    @property
    def mode(self) -> str:
        return self._watch.mode

    @property
    def unreachable_since(self) -> float | None:
        """Loop time of the first failed contact in the current run of failures (None: reachable)."""
        return self._watch.unreachable_since

    @property
    def last_error(self) -> BaseException | None:
        return self._watch.last_error

    @property
    def endpoint(self) -> str:
        return str(getattr(self._watch.kube, "endpoint", "") or "?")


class SharedWatch:
    """The cache of one (connection, resource, namespace[, label]) and the task keeping it current."""

    def __init__(self, key: WatchKey, kube: Any, settings: WatchSettings) -> None:
        self.key = key
        self.kube = kube
        self.settings = settings
        self.objects: dict[str, Obj] = {}
        self.index: dict[str, dict[str, Obj]] = {}
        self.subs: dict[str, set[Subscription]] = {}
        self.synced = False
        self.error: ApiError | None = None
        self.mode: Literal["watch", "poll"] = "watch"
        self.resource_version = ""
        self.stats: Counter[str] = Counter()
        self.unreachable_since: float | None = None
        self.last_error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    # -- fan-out ----------------------------------------------------------------------------------------
    @property
    def refs(self) -> int:
        return sum(len(subs) for subs in self.subs.values())

    @property
    def finished(self) -> bool:
        return self._task is not None and self._task.done()

    def add(self, value: str, wake: asyncio.Event, poll_interval: float | None = None) -> Subscription:
        sub = Subscription(self, value, wake, poll_interval)
        self.subs.setdefault(value, set()).add(sub)
        if self.synced or self.error is not None:
            wake.set()  # the cache already answers: evaluate at once
        return sub

    def remove(self, sub: Subscription) -> None:
        subs = self.subs.get(sub.value)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.subs[sub.value]

    def _notify(self, value: str | None) -> None:
        for sub in self.subs.get(value, ()) if value is not None else ():
            sub.wake.set()

    def _notify_all(self) -> None:
        for subs in self.subs.values():
            for sub in subs:
                sub.wake.set()

    def _put(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        obj.setdefault("apiVersion", self.key.resource.api_version)
        obj.setdefault("kind", self.key.resource.kind)
        old = self.objects.get(name)
        old_value = self.key.index_of(old) if old is not None else None
        new_value = self.key.index_of(obj)
        self.objects[name] = obj
        if old_value is not None and old_value != new_value:
            self._unindex(old_value, name)
        if new_value is not None:
            self.index.setdefault(new_value, {})[name] = obj
        self._notify(old_value)
        if new_value != old_value:
            self._notify(new_value)

    def _drop(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        old = self.objects.pop(name, None)
        value = self.key.index_of(old if old is not None else obj)
        if value is None:
            return
        self._unindex(value, name)
        for sub in self.subs.get(value, ()):
            sub.tombstones[name] = obj
        self._notify(value)

    def _unindex(self, value: str, name: str) -> None:
        bucket = self.index.get(value)
        if bucket is not None:
            bucket.pop(name, None)
            if not bucket:
                del self.index[value]

    def _replace_all(self, items: list[Obj]) -> None:
        """A fresh LIST: drop what vanished, store what changed (by resourceVersion)."""
        fresh = {str((o.get("metadata") or {}).get("name")): o for o in items}
        for name in [n for n in self.objects if n not in fresh]:
            self._drop(self.objects[name])
        for name, obj in fresh.items():
            old = self.objects.get(name)
            if old is None or _rv(old) != _rv(obj):
                self._put(obj)
        if not self.synced:
            self.synced = True
            self._notify_all()

    def _apply(self, event_type: str, obj: Obj) -> None:
        if event_type in ("ADDED", "MODIFIED"):
            self._put(obj)
        elif event_type == "DELETED":
            self._drop(obj)
        rv = _rv(obj)
        if rv:
            self.resource_version = rv

    def _reached(self) -> None:
        self.unreachable_since = None
        self.last_error = None

    def _missed(self, exc: ApiError) -> None:
        """No answer from the API server: start (or continue) the unreachable clock, wake the subscribers
        when it starts so they can time their budget."""
        self.last_error = exc
        if self.unreachable_since is None:
            self.unreachable_since = asyncio.get_running_loop().time()
            self._notify_all()

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        name = f"watch {self.key.resource.plural} in {self.key.namespace} ({self.key.conn_id})"
        self._task = asyncio.get_running_loop().create_task(self._run(), name=name)

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        self.cancel()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    # -- the loop ---------------------------------------------------------------------------------------
    async def _run(self) -> None:
        failures = 0
        while True:
            listing = not self.resource_version
            try:
                if listing:
                    await self._list()
                if self.mode == "poll":
                    await asyncio.sleep(self._poll_interval())
                    self.resource_version = ""
                    continue
                listing = False
                failures = 0 if await self._watch() else failures + 1
                if failures == 0:
                    continue
                delay = self.settings.backoff(failures - 1)
            except ApiError as exc:
                if self._handle_refusal(exc, listing):
                    if self.error is not None:
                        return
                    continue
                if exc.status in UNREACHABLE_STATUSES:
                    self._missed(exc)
                else:
                    self._reached()  # it answered (429, 500...): reachable, if unhappy
                delay = self._delay(exc, failures)
                failures += 1
                self.stats["errors"] += 1
                log.info("watch on %s: %s; retrying in %.1fs", self.key.resource.plural, exc, delay)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug or an unexpected payload must not kill every waiter silently
                delay = self.settings.backoff(failures)
                failures += 1
                self.stats["errors"] += 1
                log.warning("watch on %s failed; retrying", self.key.resource.plural, exc_info=exc)
            await asyncio.sleep(delay)

    def _handle_refusal(self, exc: ApiError, listing: bool) -> bool:
        """True when ``exc`` is a verdict, not a hiccup: fail the subscribers, or fall back to polling."""
        if listing and exc.status in FATAL_LIST_STATUSES:
            self.error = exc
            self._notify_all()
            return True
        if not listing and exc.status in REFUSED_WATCH_STATUSES and self.mode == "watch":
            log.warning("watch on %s refused (%s); falling back to polling", self.key.resource.plural, exc)
            self.mode = "poll"
            self.stats["fallbacks"] += 1
            return True
        return False

    def _delay(self, exc: ApiError, failures: int) -> float:
        if exc.status == 429 and exc.retry_after is not None:
            return min(exc.retry_after, self.settings.max_retry_after)
        return self.settings.backoff(failures)

    def _poll_interval(self) -> float:
        asked = [s.poll_interval for subs in self.subs.values() for s in subs if s.poll_interval]
        return min(asked) if asked else self.settings.poll_interval

    async def _list(self) -> None:
        self.stats["lists"] += 1
        items, rv = await self.kube.run(
            list_snapshot(self.key.resource, self.key.namespace, label_selector=self.key.label_selector)
        )
        self._reached()
        self._replace_all(items)
        self.resource_version = rv

    async def _watch(self) -> bool:
        """One watch stream from ``resource_version``; True if it was healthy (delivered or lasted)."""
        loop = asyncio.get_running_loop()
        timeout = int(self.settings.timeout_seconds * (1 + random.random() * self.settings.timeout_jitter))
        request = watch_request(
            self.key.resource,
            self.key.namespace,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
            read_timeout=timeout + self.settings.inactivity_grace,
            label_selector=self.key.label_selector,
            bookmarks=True,
        )
        started = loop.time()
        response = await self.kube.stream(request)
        self._reached()
        self.stats["watches"] += 1
        progressed = False
        busy_since = time.perf_counter()
        try:
            async for event in _events(response):
                if time.perf_counter() - busy_since >= YIELD_EVERY:
                    await asyncio.sleep(0)  # buffered events are read without suspending: let others run
                    busy_since = time.perf_counter()
                if event.get("type") == "ERROR":
                    return self._on_error_event(event.get("object") or {}, progressed)
                self._apply(str(event.get("type")), event.get("object") or {})
                self.stats["events"] += 1
                progressed = True
        except ApiError as exc:
            if exc.status != 0:
                raise
            self.stats["cuts"] += 1  # connection lost mid-stream: resume from the last resourceVersion
        finally:
            response.close()
        return progressed or loop.time() - started >= self.settings.min_healthy_stream

    def _on_error_event(self, status: Mapping[str, Any], progressed: bool) -> bool:
        error = api_error(200, status)
        if not error.gone:
            raise error
        self.stats["expired"] += 1
        self.resource_version = ""  # 410 Expired: re-list
        return progressed


async def _events(response: Any) -> AsyncIterator[Obj]:
    """Watch events as they arrive, one JSON document per line; transport errors as ``ApiError(0)``."""
    import aiohttp

    try:
        async for line in response.content:
            if line.strip():
                yield json.loads(line)
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise ApiError(0, type(exc).__name__, str(exc) or type(exc).__name__) from exc


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class WatchRegistry:
    """The shared watches of one event loop, reference counted by their subscriptions."""

    def __init__(self, settings: WatchSettings | None = None) -> None:
        self.settings = settings or WatchSettings()
        self.watches: dict[WatchKey, SharedWatch] = {}
        self._stoppers: dict[WatchKey, asyncio.TimerHandle] = {}

    @contextlib.asynccontextmanager
    async def subscribe(
        self,
        key: WatchKey,
        value: str,
        wake: asyncio.Event,
        *,
        kube: Any = None,
        poll_interval: float | None = None,
    ) -> AsyncIterator[Subscription]:
        """Share (or start) the watch for ``key`` and receive changes of objects indexed ``value``."""
        watch = self.watches.get(key)
        if watch is None or watch.finished:
            if kube is None:
                from airflow_k8s_ml.kube.async_client import get_kube

                kube = await get_kube(key.conn_id)
            watch = self.watches.get(key)  # another waiter may have started it meanwhile
            if watch is None or watch.finished:
                watch = SharedWatch(key, kube, self.settings)
                self.watches[key] = watch
                watch.start()
        stopper = self._stoppers.pop(key, None)
        if stopper is not None:
            stopper.cancel()
        sub = watch.add(value, wake, poll_interval)
        try:
            yield sub
        finally:
            watch.remove(sub)
            if watch.refs == 0:
                self._release(key, watch)

    def _release(self, key: WatchKey, watch: SharedWatch) -> None:
        if self.settings.linger <= 0:
            self._stop(key, watch)
            return
        loop = asyncio.get_running_loop()
        self._stoppers[key] = loop.call_later(self.settings.linger, self._stop, key, watch)

    def _stop(self, key: WatchKey, watch: SharedWatch) -> None:
        self._stoppers.pop(key, None)
        if watch.refs:
            return
        if self.watches.get(key) is watch:
            del self.watches[key]
        watch.cancel()

    async def close(self) -> None:
        for handle in self._stoppers.values():
            handle.cancel()
        self._stoppers.clear()
        watches, self.watches = list(self.watches.values()), {}
        for watch in watches:
            await watch.stop()


_registries: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WatchRegistry] = weakref.WeakKeyDictionary()


def get_registry(settings: WatchSettings | None = None) -> WatchRegistry:
    """The running loop's registry; ``settings`` apply only when this call creates it (tests pass them
    first to shrink timings)."""
    loop = asyncio.get_running_loop()
    registry = _registries.get(loop)
    if registry is None:
        registry = WatchRegistry(settings)
        _registries[loop] = registry
    return registry


def reset_registry(settings: WatchSettings | None = None) -> WatchRegistry:
    """Replace the running loop's registry (tests); the old one's watches are cancelled."""
    loop = asyncio.get_running_loop()
    old = _registries.pop(loop, None)
    if old is not None:
        for watch in old.watches.values():
            watch.cancel()
    return get_registry(settings)
