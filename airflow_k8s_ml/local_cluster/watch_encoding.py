"""Watch events encoded once and shared by every watcher, and written in bounded chunks.

Why: serving each watcher its own ``json.dumps`` of every event made memory grow with watchers times
object size (a 5 MB object and 20 watchers that did not read: ~7.6 MB each, and a 63 MB ConfigMap with
200 watchers took the server to 20 GB). glibc keeps such large, short-lived buffers in its heap after
they are freed, so the memory did not come back when the watchers closed. Like the API server's
``cachingObject`` (serialize once per event and encoding), an event is encoded once per
(resourceVersion, type, apiVersion) and the same ``bytes`` go to every watcher. Writes go out in 64 KiB
slices of that buffer (memoryviews, no copies), waiting for each to drain, so a slow reader holds at most
a slice in the server's transport buffer instead of a whole copy of the object.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Protocol

Obj = dict[str, Any]
CHUNK = 64 * 1024


class Writer(Protocol):
    async def write(self, data: bytes | bytearray | memoryview) -> None: ...


def encode_event(event_type: str, obj: Obj) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


class EventCache:
    """A byte-bounded LRU of encoded events, keyed by (resourceVersion, type, apiVersion): a
    resourceVersion names one version of one object, so the key names the bytes exactly."""

    def __init__(self, budget: int = 32 * 1024 * 1024) -> None:
        self._budget = budget
        self._used = 0
        self._items: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()

    def event(self, event_type: str, obj: Obj) -> bytes:
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if not rv:
            return encode_event(event_type, obj)
        key = (str(rv), event_type, str(obj.get("apiVersion", "")))
        cached = self._items.get(key)
        if cached is not None:
            self._items.move_to_end(key)
            return cached
        data = encode_event(event_type, obj)
        if len(data) <= self._budget // 4:
            self._items[key] = data
            self._used += len(data)
            while self._used > self._budget:
                _, dropped = self._items.popitem(last=False)
                self._used -= len(dropped)
        return data


async def write_chunked(writer: Writer, data: bytes) -> None:
    """Write ``data`` in CHUNK-sized views, each drained before the next is handed over."""
    if len(data) <= CHUNK:
        await writer.write(data)
        return
    view = memoryview(data)
    for start in range(0, len(view), CHUNK):
        await writer.write(view[start : start + CHUNK])
