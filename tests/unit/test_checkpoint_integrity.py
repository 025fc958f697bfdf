"""Integrity decisions from already-fetched facts (listing, HeadObject checksum, streamed hash)."""

from __future__ import annotations

import hashlib

import pytest

from airflow_k8s_ml.checkpoints.integrity import (
    check_mode,
    content_problem,
    listing_problems,
    stored_checksum_problem,
)
from airflow_k8s_ml.checkpoints.manifest import Manifest, ManifestFile, hex_to_b64
from airflow_k8s_ml.errors import ValidationError

SHA = hashlib.sha256(b"abc").hexdigest()
ENTRY = ManifestFile("model.pt", 3, SHA, key="data-1/model.pt")


def test_listing_problems_name_missing_and_resized_files_and_a_wrong_step() -> None:
    manifest = Manifest(step=3, files=(ENTRY, ManifestFile("b.bin", 5, SHA)))
    assert listing_problems(manifest, 3, {"data-1/model.pt": 3, "b.bin": 5, "extra": 1}) == []
    assert listing_problems(manifest, 4, {"data-1/model.pt": 2}) == [
        "MANIFEST.json says step 3 but the folder is step-4",
        "model.pt: size 2 in storage, 3 in MANIFEST.json",
        "b.bin: missing (listed in MANIFEST.json, not in storage)",
    ]


def test_stored_checksum_comparison() -> None:
    good = hex_to_b64(SHA)
    assert stored_checksum_problem(ENTRY, 3, good) is None
    assert stored_checksum_problem(ENTRY, None, None) == "model.pt: missing"
    assert "size 4 in storage" in str(stored_checksum_problem(ENTRY, 4, good))
    assert "no SHA-256 checksum" in str(stored_checksum_problem(ENTRY, 3, None))
    other = hex_to_b64(hashlib.sha256(b"abd").hexdigest())
    assert f"stored SHA-256 {other} differs" in str(stored_checksum_problem(ENTRY, 3, other))


def test_composite_checksums_compare_with_or_without_the_parts_suffix() -> None:
    entry = ManifestFile("big", 3, SHA, s3_checksum="QUJD-3")
    assert stored_checksum_problem(entry, 3, "QUJD-3") is None
    assert stored_checksum_problem(entry, 3, "QUJD") is None
    assert stored_checksum_problem(entry, 3, "QUJE-3") is not None


def test_content_problem() -> None:
    assert content_problem(ENTRY, 3, SHA) is None
    assert content_problem(ENTRY, 2, SHA) == "model.pt: 2 bytes read, 3 in MANIFEST.json"
    assert "differs from MANIFEST.json" in str(content_problem(ENTRY, 3, "0" * 64))


def test_check_mode() -> None:
    assert check_mode("full") == "full"
    with pytest.raises(ValidationError, match="none, checksums, full"):
        check_mode("quick")
