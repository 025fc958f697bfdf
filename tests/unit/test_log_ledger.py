"""The relay's position read back from trigger log files (triggers/log_ledger.py): pure parsing, and the
stamp each relayed line carries through structlog's context variables."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import structlog

from airflow_k8s_ml.triggers.log_ledger import ledger_cursor, logged_cursor
from airflow_k8s_ml.triggers.logs import STAMP_FIELD, stamped


def _event(text: str, stamp: str | None) -> str:
    event = {"event": text, "level": "info", "timestamp": "2026-12-05T10:00:00Z"}
    if stamp is not None:
        event[STAMP_FIELD] = stamp
    return json.dumps(event)


def test_the_furthest_stamped_line_per_replica_counting_equal_stamps() -> None:
    lines = [
        _event("trigger starting", None),
        _event("[train-abc] epoch=1/3", "2026-12-05T10:00:01.000000001Z"),
        _event("[train-abc] epoch=2/3", "2026-12-05T10:00:02.5Z"),
        _event("[train-abc] epoch=2/3 again", "2026-12-05T10:00:02.5Z"),
        _event("[worker-0] hello", "2026-12-05T10:00:01Z"),
        "not json",
        json.dumps(["a list"]),
        _event("[no-stamp] line", None),
    ]
    # files of two triggerers can come in any order: the furthest position wins
    assert ledger_cursor(reversed(lines)) == {
        "train-abc": {"ts": "2026-12-05T10:00:02.5Z", "n": 2},
        "worker-0": {"ts": "2026-12-05T10:00:01Z", "n": 1},
    }


def test_nothing_relayed_is_an_empty_cursor() -> None:
    assert ledger_cursor([_event("trigger starting", None), b""]) == {}


def test_no_task_instance_or_no_files_leaves_it_to_the_persisted_cursor() -> None:
    assert logged_cursor(None) is None


def test_a_relayed_line_carries_its_stamp_only_inside_the_block() -> None:
    merged: list[dict[str, object]] = []
    with stamped("2026-12-05T10:00:01Z"):
        merged.append(structlog.contextvars.merge_contextvars(None, "info", {"event": "x"}))  # type: ignore[arg-type]
    merged.append(structlog.contextvars.merge_contextvars(None, "info", {"event": "y"}))  # type: ignore[arg-type]
    with stamped(""):
        merged.append(structlog.contextvars.merge_contextvars(None, "info", {"event": "z"}))  # type: ignore[arg-type]
    assert [m.get(STAMP_FIELD) for m in merged] == ["2026-12-05T10:00:01Z", None, None]


def test_the_trigger_log_files_of_the_try_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's default layout: ``<dag>/<run>/<task>/[map_index=]attempt=N.log.trigger.<job>.log``."""
    monkeypatch.setenv("AIRFLOW__LOGGING__BASE_LOG_FOLDER", str(tmp_path))
    ti = SimpleNamespace(dag_id="d", run_id="manual__1", task_id="train", map_index=2, try_number=1)
    folder = tmp_path / "dag_id=d" / "run_id=manual__1" / "task_id=train" / "map_index=2"
    folder.mkdir(parents=True)
    assert logged_cursor(ti) is None  # no trigger ran yet: the persisted cursor decides
    (folder / "attempt=1.log.trigger.7.log").write_text(_event("[p] a", "2026-12-05T10:00:01Z") + "\n")
    (folder / "attempt=1.log.trigger.9.log").write_text(_event("[p] b", "2026-12-05T10:00:02Z") + "\n")
    (folder / "attempt=2.log.trigger.9.log").write_text(_event("[p] c", "2026-12-05T10:00:03Z") + "\n")
    assert logged_cursor(ti) == {"p": {"ts": "2026-12-05T10:00:02Z", "n": 1}}
