"""The file:// twin: staged directory + atomic rename, same store semantics as S3, no server needed."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from airflow_k8s_ml.checkpoints import CheckpointStore, CheckpointWriter, download_checkpoint
from airflow_k8s_ml.errors import CheckpointError, ValidationError


def _commit(base: str, step: int, tmp_path: Path, accuracy: float = 0.9) -> str:
    weights = tmp_path / f"w{step}.bin"
    weights.write_bytes(os.urandom(2048))
    return CheckpointWriter(base).commit(
        step, {"model.pt": str(weights), "config.json": b"{}"}, metrics={"val_accuracy": accuracy}
    )


def test_commit_layout_and_newest_complete(tmp_path: Path) -> None:
    root = tmp_path / "ckpts"
    base = f"file://{root}"
    for step in (1, 2, 3):
        assert _commit(base, step, tmp_path) == f"{base}/step-{step}/"
    assert sorted(os.listdir(root / "step-3")) == ["MANIFEST.json", "config.json", "model.pt"]
    assert not [n for n in os.listdir(root) if n.startswith(".staging")]
    store = CheckpointStore(base)
    assert [(c.step, c.complete) for c in store.list()] == [(1, True), (2, True), (3, True)]
    assert store.latest_complete().step == 3  # type: ignore[union-attr]

    (root / "step-3" / "model.pt").unlink()
    (root / "step-10").mkdir()
    (root / "step-10" / "model.pt").write_bytes(b"partial")  # another tool's half copy: no manifest
    scan = store.scan()
    assert scan.latest is not None and scan.latest.step == 2
    assert [(c.step, c.problem) for c in scan.skipped] == [
        (10, "no MANIFEST.json (1 objects; upload unfinished or abandoned)"),
        (3, "model.pt: missing (listed in MANIFEST.json, not in storage)"),
    ]


def test_same_size_corruption_is_found_by_hashing(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/c"
    uri = _commit(base, 1, tmp_path)
    target = tmp_path / "c" / "step-1" / "model.pt"
    data = bytearray(target.read_bytes())
    data[100] ^= 0xFF
    target.write_bytes(bytes(data))
    store = CheckpointStore(base)
    assert store.verify(uri, mode="none") == []
    problems = store.verify(uri)  # a filesystem stores no checksum, so "checksums" hashes
    assert len(problems) == 1 and problems[0].startswith("model.pt: sha256 ")
    assert store.latest_complete() is None
    assert store.latest_complete(verify="none").step == 1  # type: ignore[union-attr]


def test_racing_writers_exactly_one_wins(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/race"
    barrier, results = threading.Barrier(8), []

    def write(i: int) -> None:
        writer = CheckpointWriter(base)
        barrier.wait()
        try:
            writer.commit(5, {"model.pt": os.urandom(50_000) + bytes([i])}, metrics={"writer": i})
            results.append("won")
        except CheckpointError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("won") == 1
    losers = [r for r in results if r != "won"]
    assert all("step-5" in r and ("committed" in r or "already exists" in r) for r in losers)
    assert os.listdir(tmp_path / "race") == ["step-5"]  # losers' staging removed
    assert CheckpointStore(base).verify(f"{base}/step-5/", mode="full") == []


def test_download_verifies_and_refuses_bad_bytes(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/d"
    uri = _commit(base, 4, tmp_path)
    manifest = download_checkpoint(uri, str(tmp_path / "out"))
    assert manifest.step == 4
    assert sorted(os.listdir(tmp_path / "out")) == ["MANIFEST.json", "config.json", "model.pt"]
    (tmp_path / "d" / "step-4" / "config.json").write_bytes(b"[]")
    with pytest.raises(CheckpointError, match=r"config\.json: sha256"):
        download_checkpoint(uri, str(tmp_path / "out2"))
    assert not (tmp_path / "out2" / "config.json").exists()
    assert not (tmp_path / "out2" / "config.json.partial").exists()


def test_writer_refuses_committed_step_and_bad_input_before_writing(tmp_path: Path) -> None:
    base = f"file://{tmp_path}/w"
    _commit(base, 1, tmp_path)
    with pytest.raises(CheckpointError, match="already committed"):
        CheckpointWriter(base).commit(1, {"x": b"1"})
    with pytest.raises(ValidationError):
        CheckpointWriter(base).commit(2, {"../x": b"1"})
    with pytest.raises(ValidationError):
        CheckpointWriter(base).commit(2, {"MANIFEST.json": b"1"})
    with pytest.raises(ValidationError, match="finite"):
        CheckpointWriter(base).commit(2, {"x": b"1"}, metrics={"loss": float("nan")})
    assert sorted(os.listdir(tmp_path / "w")) == ["step-1"]


def test_directory_sources(tmp_path: Path) -> None:
    src = tmp_path / "hf"
    (src / "sub").mkdir(parents=True)
    (src / "a.json").write_text("{}")
    (src / "sub" / "b.bin").write_bytes(b"bb")
    base = f"file://{tmp_path}/dirs"
    uri = CheckpointWriter(base).commit(1, {".": str(src), "copy": str(src)})
    paths = sorted(f.path for f in CheckpointStore(base).get(uri).files)
    assert paths == ["a.json", "copy/a.json", "copy/sub/b.bin", "sub/b.bin"]
