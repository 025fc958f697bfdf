"""The checkpoint format: step naming, MANIFEST.json round trip and its strict parser, hash helpers."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from airflow_k8s_ml.checkpoints.manifest import (
    FORMAT,
    Manifest,
    ManifestFile,
    clean_metrics,
    composite_sha256,
    hex_to_b64,
    parse_step_folder,
    sha256_file,
    step_folder,
)
from airflow_k8s_ml.errors import CheckpointError, ValidationError

SHA = hashlib.sha256(b"abc").hexdigest()


def test_step_folder_is_unpadded_and_parsing_accepts_padding() -> None:
    assert step_folder(3) == "step-3"
    assert parse_step_folder("step-3") == 3
    assert parse_step_folder("step-007/") == 7
    for name in ("step-", "step-x", "steps-3", "step-3.tmp", ".staging-step-3-abc"):
        assert parse_step_folder(name) is None
    with pytest.raises(ValidationError):
        step_folder(-1)


def test_manifest_round_trip_keeps_everything() -> None:
    manifest = Manifest(
        step=12,
        files=(ManifestFile("model.pt", 3, SHA, key="data-1/model.pt"), ManifestFile("cfg/a.json", 0, SHA)),
        metrics={"val_accuracy": 0.93, "loss": 0.2},
        created_at="2026-01-02T03:04:05.000Z",
        framework="pytorch",
        commit_id="abc",
        extra={"note": "x"},
    )
    raw = json.loads(manifest.to_json())
    assert raw["format"] == FORMAT
    assert raw["files"][0] == {"path": "model.pt", "size": 3, "sha256": SHA, "key": "data-1/model.pt"}
    assert Manifest.from_json(manifest.to_json()) == manifest


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda m: m.update(format="other"), "format"),
        (lambda m: m.update(step="3"), "step"),
        (lambda m: m["files"][0].update(path="../escape"), "files[].path"),
        (lambda m: m["files"][0].update(path="/abs"), "files[].path"),
        (lambda m: m["files"][0].update(sha256="XYZ"), "sha256"),
        (lambda m: m["files"][0].update(size=-1), "size"),
        (lambda m: m["files"].append(dict(m["files"][0])), "same path twice"),
        (lambda m: m.update(metrics={"loss": "low"}), "not a number"),
    ],
)
def test_manifest_parser_rejects_malformed_input(mutate, fragment) -> None:
    raw = json.loads(Manifest(step=1, files=(ManifestFile("a.bin", 3, SHA),)).to_json())
    mutate(raw)
    with pytest.raises(CheckpointError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        Manifest.from_json(json.dumps(raw))


def test_manifest_parser_rejects_non_json() -> None:
    with pytest.raises(CheckpointError, match="not valid JSON"):
        Manifest.from_json(b"{half")


def test_hash_helpers(tmp_path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc" * 1000)
    assert sha256_file(str(path), chunk=7) == (3000, hashlib.sha256(b"abc" * 1000).hexdigest())
    assert hex_to_b64(SHA) == base64.b64encode(hashlib.sha256(b"abc").digest()).decode()
    parts = [hashlib.sha256(b"p1").digest(), hashlib.sha256(b"p2").digest()]
    expected = base64.b64encode(hashlib.sha256(parts[0] + parts[1]).digest()).decode()
    assert composite_sha256(parts) == f"{expected}-2"


def test_expected_s3_checksum_prefers_the_composite() -> None:
    assert ManifestFile("a", 1, SHA).expected_s3_checksum == hex_to_b64(SHA)
    assert ManifestFile("a", 1, SHA, s3_checksum="abc=-3").expected_s3_checksum == "abc=-3"


def test_clean_metrics_rejects_non_finite_and_non_numbers() -> None:
    assert clean_metrics({"a": 1, "b": 0.5}) == {"a": 1.0, "b": 0.5}
    for bad in (float("nan"), float("inf"), "0.9", None, True):
        with pytest.raises(ValidationError) as info:
            clean_metrics({"m": bad})
        assert info.value.field == "metrics.m"
