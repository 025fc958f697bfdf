"""The run-id folder rule is one-to-one and keeps the folders the nightly DAG already used."""

from __future__ import annotations

import re

from airflow_k8s_ml.checkpoints import run_folder

#: Pairs that shared a folder under the DAG's former filter (it dropped or merged unsafe characters).
COLLIDED_BEFORE = [
    ("sec_A", "sec_A+"),
    ("sec_A", "+sec_A"),
    ("a-b", "a:b"),
    ("a-b", "a::b"),
    ("", "+++"),
    ("manual__2026-12-01T01-30-00-00-00", "manual__2026-12-01T01:30:00+00:00"),
    ("scheduled__2026-12-01T01-30-00-00-00", "scheduled__2026-12-01T01:30:00-00:00"),
]


def _former(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def test_run_ids_that_collided_before_get_different_folders() -> None:
    for first, second in COLLIDED_BEFORE:
        assert _former(first) == _former(second) or first == ""
        assert run_folder(first) != run_folder(second), (first, second)


def test_a_safe_run_id_keeps_its_folder() -> None:
    for run_id in ("sec_A", "nightly-2026.12.01", "backfill_42"):
        assert run_folder(run_id) == run_id


def test_airflow_generated_run_ids_keep_the_folder_the_nightly_dag_gave_them() -> None:
    for run_id in (
        "manual__2026-12-01T01:30:00+00:00",
        "scheduled__2026-12-01T01:30:00+00:00",
        "manual__2026-12-01T01:30:00.123456+00:00",
        "asset_triggered__2026-12-01T01:30:00+00:00",
    ):
        assert run_folder(run_id) == _former(run_id)


def test_every_folder_is_one_path_segment_and_distinct() -> None:
    ids = ["", ".", "..", "a/../b", "a/b", "a\\b", "x" * 300, "x" * 301, "ü", "u", "~", "a~b", "\n"]
    ids += [first for first, _ in COLLIDED_BEFORE] + [second for _, second in COLLIDED_BEFORE]
    folders = {run_id: run_folder(run_id) for run_id in ids}
    assert len(set(folders.values())) == len(set(ids))
    for folder in folders.values():
        assert re.fullmatch(r"[A-Za-z0-9._~-]+", folder) and folder not in (".", "..")
        assert len(folder) <= 200


def test_a_changed_id_carries_the_mark_no_kept_id_has() -> None:
    assert run_folder("sec_A+").startswith("sec_A_~")
    assert "~" not in run_folder("sec_A")
    assert run_folder("a~b") != "a~b"
