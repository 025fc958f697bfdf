"""Warning events as one line each (pure): what ``kubectl describe`` shows under "Events".

Shared by the sync client (failure messages in the operator) and the trigger (deadline/failure events),
so both print the same text: ``Pod/train-abc12 FailedScheduling: 0/1 nodes are available: ... (x3)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["format_warnings", "select_warnings"]


def _when(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def select_warnings(events: Iterable[Mapping[str, Any]], uids: set[str]) -> list[Mapping[str, Any]]:
    """Warning events whose involved object is one of ``uids``, oldest first."""
    chosen = [
        e
        for e in events
        if e.get("type") == "Warning" and str((e.get("involvedObject") or {}).get("uid")) in uids
    ]
    return sorted(chosen, key=_when)


def format_warning(event: Mapping[str, Any]) -> str:
    involved = event.get("involvedObject") or {}
    text = f"{involved.get('kind', '?')}/{involved.get('name', '?')} {event.get('reason', '')}: "
    text += str(event.get("message") or "").strip()
    count = event.get("count")
    if isinstance(count, int) and count > 1:
        text += f" (x{count})"
    return text


def format_warnings(events: Iterable[Mapping[str, Any]], limit: int = 20) -> list[str]:
    """The newest ``limit`` warnings, formatted, oldest first."""
    lines = [format_warning(e) for e in events]
    return lines[-limit:] if limit else lines
