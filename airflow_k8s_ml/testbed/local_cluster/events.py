"""Events as the controllers and the kubelet emit them: named ``<object>.<hex nanos>``, aggregated by
(involved object, reason, message) with a ``count``, like client-go's event correlator."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .meta import rfc3339, rfc3339_nano
from .resources import lookup
from .store import Store

EVENTS = lookup("", "v1", "events")


class EventRecorder:
    def __init__(self, store: Store, clock: Callable[[], float], node_name: str) -> None:
        self._store = store
        self._clock = clock
        self._node = node_name
        self._index: dict[tuple[str, str, str, str], str] = {}

    def record(self, obj: dict[str, Any], type_: str, reason: str, message: str, component: str) -> None:
        assert EVENTS is not None
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (meta.get("uid", ""), reason, message, type_)
        now = self._clock()
        existing = self._index.get(key)
        if existing is not None:

            def bump(ev: dict[str, Any]) -> None:
                ev["count"] = ev.get("count", 1) + 1
                ev["lastTimestamp"] = rfc3339(now)

            if self._store.mutate(EVENTS, namespace, existing, bump) is not None:
                return
        name = f"{meta['name']}.{time.time_ns():x}"
        event = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "kind": obj.get("kind"),
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta.get("uid"),
                "apiVersion": obj.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": component, **({"host": self._node} if component == "kubelet" else {})},
            "firstTimestamp": rfc3339(now),
            "lastTimestamp": rfc3339(now),
            "eventTime": None,
            "count": 1,
            "reportingComponent": component,
            "reportingInstance": self._node if component == "kubelet" else "",
        }
        try:
            self._store.create(EVENTS, event)
        except Exception:  # an event must never break the controller that records it
            return
        self._index[key] = name
        _ = rfc3339_nano
