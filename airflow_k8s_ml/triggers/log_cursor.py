"""The log relay's cursor, persisted on the workload object, so a new trigger resumes where the last one was.

Why on the cluster: a trigger's memory dies with its triggerer (kill -9, OOM, node loss) and its final event
is never sent, so a fresh trigger started from the deferral's kwargs would replay every line (or, resuming
from a stale cursor, replay many). The workload object outlives every triggerer, is already watched by the
trigger (its annotations arrive in the watch cache, no extra read), and is deleted with the workload.

What is stored: the annotation :data:`CURSOR_ANNOTATION` on the workload holds
``{"try": <Airflow try number>, "streams": {<replica key>: {"ts": <RFC3339Nano>, "n": <lines>}}}``. The try
number scopes it: a retry that adopts a still-running workload starts from its beginning (the lines belong
in the new try's log too), while a restarted trigger of the same try resumes after the cursor.

When it is written (:class:`CursorWriter`): right after lines are relayed, by a JSON merge patch of that one
annotation; at most one patch in flight, and at most one per ``min_interval`` (a burst of lines is coalesced
into one write; a line after a quiet spell is written at once). A silent workload costs no request. On a
clean exit (the final event, a triggerer's graceful stop) the last cursor is flushed.

The window of the cursor alone: lines relayed after the last completed write and before a kill -9
are relayed again by the next trigger (at most the lines of one ``min_interval``, usually those of one
round trip); and a line the triggerer's runner handed to its supervisor but the supervisor never wrote
before dying is lost. Both need the kill to land within milliseconds of a line (or inside a burst). Where
the try's trigger log files can be read, :mod:`.log_ledger` closes that window: the next trigger resumes
after the last line the log holds, and the cursor is only the fallback.

Pure parts (:func:`read_cursor`, :func:`encode_cursor`, :func:`merge_cursors`) are unit-tested.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from airflow_k8s_ml.kube.errors import ApiError
from airflow_k8s_ml.kube.resources import Resource
from airflow_k8s_ml.kube.retry import is_retryable
from airflow_k8s_ml.manifests.naming import ANNOTATION_PREFIX
from airflow_k8s_ml.triggers.logs import Cursor, timestamp_key

__all__ = ["CURSOR_ANNOTATION", "CursorWriter", "encode_cursor", "merge_cursors", "read_cursor"]

CURSOR_ANNOTATION = ANNOTATION_PREFIX + "log-cursor"
#: At most one cursor write per this many seconds per trigger (a burst coalesces; a lone line goes at once).
MIN_INTERVAL = 1.0
#: How long a clean exit waits for the last cursor write.
FLUSH_TIMEOUT = 3.0

Streams = dict[str, Cursor]


def read_cursor(obj: Mapping[str, Any] | None, try_number: int | None) -> Streams:
    """The streams' cursors persisted on ``obj`` by a trigger of try ``try_number``; {} for another try,
    none, or a value we cannot read (then lines are relayed again rather than lost)."""
    if try_number is None:
        return {}
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(CURSOR_ANNOTATION)
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(value, dict) or value.get("try") != try_number:
        return {}
    streams = value.get("streams")
    if not isinstance(streams, dict):
        return {}
    return {
        str(key): {"ts": str(c["ts"]), "n": int(c.get("n", 1))}
        for key, c in streams.items()
        if isinstance(c, dict) and timestamp_key(str(c.get("ts", ""))) is not None
    }


def encode_cursor(try_number: int, streams: Mapping[str, Cursor]) -> str:
    """The annotation value (compact JSON, keys sorted: equal cursors give equal strings)."""
    return json.dumps({"try": try_number, "streams": dict(streams)}, separators=(",", ":"), sort_keys=True)


def _position(cursor: Mapping[str, Any]) -> tuple[tuple[int, int], int]:
    return timestamp_key(str(cursor.get("ts", ""))) or (0, 0), int(cursor.get("n", 1))


def merge_cursors(*sources: Mapping[str, Cursor] | None) -> Streams:
    """Per stream, the furthest cursor of all ``sources`` (the kwargs' cursor and the persisted one)."""
    out: Streams = {}
    for source in sources:
        for key, cursor in (source or {}).items():
            if key not in out or _position(cursor) > _position(out[key]):
                out[key] = {"ts": str(cursor["ts"]), "n": int(cursor.get("n", 1))}
    return out


class CursorWriter:
    """Writes the relay's cursor onto the workload: at most one patch in flight, one per ``min_interval``.

    ``snapshot`` returns the current cursor (the relay's); :meth:`mark` is called after every relayed line.
    An answer no retry changes (403: no RBAC to patch the workload; 404: it is gone) disables the writer
    with one warning: the relay goes on, only a restart would replay lines. A lost connection or a 5xx
    leaves the cursor pending for the next line or the final flush.
    """

    def __init__(
        self,
        kube: Any,
        resource: Resource,
        namespace: str,
        name: str,
        try_number: int,
        snapshot: Callable[[], Mapping[str, Cursor]],
        log: logging.Logger | Any,
        *,
        min_interval: float = MIN_INTERVAL,
    ) -> None:
        self.kube = kube
        self.target = (resource.api_version, resource.kind, name, namespace)
        self.try_number = try_number
        self.snapshot = snapshot
        self.log = log
        self.min_interval = min_interval
        self.writes = 0  # completed patches (tests, benchmarks)
        self._written = encode_cursor(try_number, snapshot())  # the starting point needs no write
        self._dirty = False
        self._disabled = False
        self._last_start: float | None = None
        self._writing = False
        self._landed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def mark(self) -> None:
        """Lines were relayed: write the cursor soon (now, unless a write is in flight or was just made)."""
        if self._disabled:
            return
        self._dirty = True
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._write_loop())

    async def flush(self, timeout: float = FLUSH_TIMEOUT) -> None:
        """Write what is pending now (clean exits); bounded by ``timeout``, never raises."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._flush(), timeout)

    async def _flush(self) -> None:
        task = self._task
        if task is not None and not task.done():
            if self._writing:  # a patch is on the wire: let it land, then stop the loop's next pause
                self._landed.clear()
                await self._landed.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not self._disabled:  # a no-op when the last written cursor is current
            self._dirty = False
            await self._write()

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _write_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._dirty and not self._disabled:
            if self._last_start is not None:
                pause = self._last_start + self.min_interval - loop.time()
                if pause > 0:
                    await asyncio.sleep(pause)
            self._dirty = False
            self._last_start = loop.time()
            if not await self._write():
                return  # retried with the next line, or at the final flush

    async def _write(self) -> bool:
        value = encode_cursor(self.try_number, self.snapshot())
        if value == self._written:
            return True
        body = {"metadata": {"annotations": {CURSOR_ANNOTATION: value}}}
        self._writing = True
        try:
            await self.kube.patch(*self.target, body)
        except ApiError as exc:
            if not is_retryable(exc):  # 403 (RBAC), 404 (gone), 422...: no later write would fare better
                self._disabled = True
                self.log.warning(
                    "cannot persist the log cursor (%s); a restarted trigger may repeat lines", exc
                )
            else:
                self._dirty = True
            return False
        finally:
            self._writing = False
            self._landed.set()
        self._written = value
        self.writes += 1
        return True
