"""A small reconcile loop shared by every controller: a de-duplicating work queue fed by store changes
and by a periodic resync (time-based rules: deadlines, back-offs, TTLs, schedules).

A controller sees the cluster only through :class:`~..services.ClusterServices` (store, events,
settings, metrics, the API server's extension points), never the ``LocalCluster`` that wires it.

Subclasses implement :meth:`keys_for` (which objects a change concerns) and :meth:`reconcile` (bring one
object to its desired state). Reconciles run on the cluster's event loop, one at a time per controller,
and a controller yields to the loop after each one, so API requests are served between reconciles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..store import Change

if TYPE_CHECKING:
    from ..services import ClusterServices

log = logging.getLogger(__name__)

ObjKey = tuple[str, str]  # (namespace, name) of the controller's primary kind
# Queued after a resync pass's keys: reaching it means their reconciles are done (the queue is FIFO).
_PASS_DONE: ObjKey = ("#resync", "done")


class Controller:
    name = "controller"

    def __init__(self, cluster: ClusterServices) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.settings = cluster.settings
        self._queue: asyncio.Queue[ObjKey] | None = None
        self._pending: set[ObjKey] = set()
        self._task: asyncio.Task[None] | None = None
        self._resync_task: asyncio.Task[None] | None = None

    # -- to override -------------------------------------------------------------------------------
    def attach(self) -> None:
        """Register admission functions and subresource handlers with the cluster (called once)."""

    def keys_for(self, change: Change) -> Iterable[ObjKey]:
        return ()

    def all_keys(self) -> Iterable[ObjKey]:
        return ()

    async def reconcile(self, key: ObjKey) -> None:
        raise NotImplementedError

    async def on_stop(self) -> None:
        """Release what the controller holds (processes, sockets)."""

    # -- machinery ---------------------------------------------------------------------------------
    def enqueue(self, key: ObjKey) -> None:
        if self._queue is not None and key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def _on_change(self, change: Change) -> None:
        for key in self.keys_for(change):
            self.enqueue(key)

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self.store.add_listener(self._on_change)
        for key in self.all_keys():
            self.enqueue(key)
        self._task = asyncio.create_task(self._work(), name=f"{self.name}-worker")
        self._resync_task = asyncio.create_task(self._resync(), name=f"{self.name}-resync")

    async def stop(self) -> None:
        for task in (self._task, self._resync_task):
            if task is not None:
                task.cancel()
        for task in (self._task, self._resync_task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self.on_stop()

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            if key == _PASS_DONE:
                self.cluster.metrics.resyncs[(self.name, "completed")] += 1
                continue
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: reconcile of %s failed", self.name, key)
            # Yield after every reconcile: a queue that is not empty never suspends ``get``, so without
            # this a controller with 200 queued keys would hold the loop (and every API request) for all.
            await asyncio.sleep(0)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_period)
            self.cluster.metrics.resyncs[(self.name, "started")] += 1
            for key in self.all_keys():
                self.enqueue(key)
            if self._queue is not None:  # not ``enqueue``: every pass gets its marker, never de-duplicated
                self._queue.put_nowait(_PASS_DONE)
