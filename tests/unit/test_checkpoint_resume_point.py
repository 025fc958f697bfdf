"""``resume_point``: the pod-side choice of the checkpoint to continue from (file:// checkpoints)."""

from __future__ import annotations

from pathlib import Path

from airflow_k8s_ml.checkpoints import CheckpointWriter, resume_point


def _commit(base: str, step: int) -> str:
    return CheckpointWriter(base).commit(step, {"model.pt": f"weights {step}".encode()})


def test_the_newest_complete_checkpoint_beats_an_older_resume_from(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/ckpt"
    first = _commit(base, 1)
    newest = _commit(base, 3)
    (tmp_path / "ckpt" / "step-4").mkdir()  # started, never committed: no manifest
    assert resume_point(base, first) == newest
    assert resume_point(base, None) == newest


def test_never_older_than_resume_from(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/ckpt"
    _commit(base, 1)
    elsewhere = _commit(f"file://{tmp_path}/other", 5)
    assert resume_point(base, elsewhere) == elsewhere


def test_nothing_to_resume_from_is_a_fresh_start(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/empty"
    assert resume_point(base, None) is None
    assert resume_point(None, None) is None
    assert resume_point(None, f"file://{tmp_path}/x/step-2/") == f"file://{tmp_path}/x/step-2/"
