"""What the task log already holds: the relay's position read back from the trigger log files.

Why: the cursor persisted on the workload (:mod:`.log_cursor`) is written after the lines it covers, so a
triggerer killed between a relayed line and that write used to relay the line again (up to ~1 s of lines),
and a line the dying triggerer's supervisor never wrote was covered by the cursor but missing from the log.
The task log is the only record of what was relayed; the cursor and the log cannot be written together. So
every relayed line carries its pod log timestamp as a structured field (:data:`STAMP_FIELD`, bound for that
one log call through structlog's context variables, which Airflow's triggerer merges into each event it
writes; :func:`.logs.stamped`), and a trigger that starts for a try reads the trigger log files of that try
(``<task log>.trigger.<triggerer job id>.log``, Airflow 3's per-triggerer files, one JSON event a line) and
resumes each stream after the last line that is really there: none doubled, none lost.

When the files cannot be read (remote logging with no shared log folder, another host, a template this
cannot render) the persisted cursor is used as before, with its documented window.

:func:`ledger_cursor` is pure (unit-tested); :func:`logged_cursor` reads the files.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from airflow_k8s_ml.triggers.logs import STAMP_FIELD, Cursor, advance, timestamp_key

__all__ = ["ledger_cursor", "logged_cursor", "trigger_log_files"]

#: A trigger log file larger than this is not read back (a flood is paced, so this is never reached).
MAX_BYTES = 64 * 1024 * 1024


def ledger_cursor(lines: Iterable[str | bytes]) -> dict[str, Cursor]:
    """Per replica key, the cursor after the furthest stamped line in the trigger log ``lines``.

    A line counts when it is a JSON event whose text starts with ``[<key>] `` and carries
    :data:`STAMP_FIELD`; the cursor's ``n`` counts the lines carrying its (latest) timestamp, as the relay's
    own cursor does. Lines of several files may come in any order.
    """
    stamps: dict[str, list[str]] = {}
    for raw in lines:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        stamp, text = event.get(STAMP_FIELD), event.get("event")
        if not isinstance(stamp, str) or not isinstance(text, str) or not text.startswith("["):
            continue
        key, sep, _ = text[1:].partition("] ")
        if sep and timestamp_key(stamp) is not None:
            stamps.setdefault(key, []).append(stamp)
    out: dict[str, Cursor] = {}
    for key, found in stamps.items():
        cursor: Cursor | None = None
        for stamp in sorted(found, key=lambda s: timestamp_key(s) or (0, 0)):
            cursor = advance(cursor, stamp)
        if cursor is not None:
            out[key] = cursor
    return out


def trigger_log_files(task_instance: Any) -> list[Path] | None:
    """The trigger log files of the task instance's try (any triggerer); None when they cannot be found
    (no task instance, no readable local log folder, a template this cannot render)."""
    if task_instance is None:
        return None
    try:
        from airflow.configuration import conf
        from airflow.utils.helpers import log_filename_template_renderer

        base = Path(conf.get("logging", "base_log_folder")).expanduser()
        relative = log_filename_template_renderer()(ti=task_instance, try_number=task_instance.try_number)
    except Exception:  # an unknown layout: fall back to the persisted cursor
        return None
    task_log = base / relative
    if not task_log.parent.is_dir():
        return None
    return sorted(task_log.parent.glob(f"{task_log.name}.trigger.*.log"))


def logged_cursor(task_instance: Any) -> dict[str, Cursor] | None:
    """Where the task log's relayed lines end, per replica key; None when the log cannot be read here.

    Read only when a trigger log file of the try is there: a trigger that ran before (one always logs its
    start) left one in a log folder this triggerer shares. None otherwise (first deferral, or the folder is
    not shared): the persisted cursor decides.
    """
    files = trigger_log_files(task_instance)
    if not files:
        return None
    lines: list[bytes] = []
    for path in files:
        with contextlib.suppress(OSError):
            if path.stat().st_size <= MAX_BYTES:
                lines.extend(path.read_bytes().splitlines())
    return ledger_cursor(lines)
